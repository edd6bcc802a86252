// Verification of proposed tokens (speculative decoding), the rule both the CPU and the GPU
// paths use.
//
// A verification step samples 1 + k rows of one request: row j is sampled exactly as a plain
// decode step would sample output index n + j (the request's parameters, seed and that index:
// Gumbel-max with Philox noise keyed by (seed, n + j, token), sampling_rule.h) given the
// known tokens and proposals 0..j-1. Proposal j is accepted when row j drew it; the first row
// whose draw differs gives the token after the accepted run, and a fully accepted run gains
// row k's token as a bonus.
//
// This is exact rejection sampling for a proposal q that is a point mass on token x (n-gram
// proposals): row j draws x with probability p(x) (accept), and given that it did not, it drew
// from p with x's mass removed, renormalized (the resample). So the output distribution is
// that of non-speculative sampling; indeed, with the same seed the output is the same token
// for token, since every emitted token is the draw a plain step would have made. Greedy rows
// draw the argmax: acceptance compares argmaxes.
#pragma once
#include <cstdint>
#include <span>

namespace gs {

// How many of `proposed` are accepted, given the 1 + proposed.size() tokens sampled for the
// rows (row j at the position before proposal j). The request then emits sampled[0 .. result].
int num_accepted_tokens(std::span<const int32_t> sampled, std::span<const int32_t> proposed);

}  // namespace gs
