// Prefix hashes for prefix caching: block i of a token sequence is identified by the hash of
// all tokens up to its end, chained (hash_i = XXH3(tokens of block i, seed = hash_{i-1})), so
// equal hashes mean equal prefixes (up to 64-bit collisions).
//
// A block's KV is a function of the model, the tokens up to its end (their positions follow from
// the chain) and the LoRA adapter the request runs with (adapters change the k / v projections).
// The model and the KV dtype are fixed for an engine's life, so the chain's root is seeded with
// the adapter alone: `extra_key` (the engine's adapter id, never reused for other weights; 0 for
// the base model). Sliding windows change which positions a query reads, never a position's KV.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace gs {

// Extends `hashes` (the chain so far) with the hash of every further full block of `tokens`.
// `extra_key` must be the same for every call on one chain.
void extend_prefix_hashes(std::span<const int32_t> tokens, int block_size, std::vector<uint64_t>& hashes,
                          uint64_t extra_key = 0);

}  // namespace gs
