// The sampling rule, step by step, as both kernels implement it (the CPU one literally, the
// CUDA one with block-parallel passes over the row). Shared constants live here.
//
// For a row with parameters r over logits x[0, V):
//  1. Logprobs (when asked) are of the raw logits: lse = log sum exp x; the sampled token's
//     x[c] - lse (or r.target_token's: a prompt token's logprob), and the top r.num_logprobs
//     tokens by (x desc, id asc).
//  2. Penalties (a penalty slot) and adjustments (logit_bias, min_tokens masks) change x; a
//     structured-output bitmask sets the tokens outside it to -inf.
//  3. A row that cannot be sampled yields a sentinel instead of a token (types/sampling_limits.h), so
//     the copy of the sampled ids to the host carries it at no cost: kNonFiniteLogits when a
//     logit is NaN or +inf, else kNoSampleableToken when every logit is -inf. Its logprobs are
//     undefined. Greedy rows take argmax x (ties: the lowest id).
//  4. Otherwise s = x / T and m = max s. The kept set K is every token with
//       s >= m + log(min_p)                       (min_p > 0),
//       s >= the k-th largest s of those          (0 < top_k < V; ties at the boundary kept, as vLLM),
//     and, within K, (top_p < 1) every token whose strictly-larger tokens of K hold less than
//     top_p of K's mass (mass in 32.32 fixed point of exp(s - m)): the smallest top set that
//     reaches top_p, ties kept. The top token is always kept, so K is never empty.
//  5. The token is argmax over K of s + Gumbel(seed, step, token): an exact draw from
//     softmax(s) restricted to K. Top-p is found without a sort by rejection that reuses the
//     same noise: the best candidate over a domain is checked; if it is outside K, every token
//     with s <= its s is too, and the next round searches above it. After kMaxRounds rounds
//     (never seen; a guard) the top token is taken.
#pragma once

namespace gs::sampling {

constexpr int kMaxRounds = 64;

}  // namespace gs::sampling
