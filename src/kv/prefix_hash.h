// Prefix hashes for prefix caching: block i of a token sequence is identified by the hash of
// all tokens up to its end, chained (hash_i = XXH3(tokens of block i, seed = hash_{i-1})), so
// equal hashes mean equal prefixes (up to 64-bit collisions).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace gs {

// Extends `hashes` (the chain so far) with the hash of every further full block of `tokens`.
void extend_prefix_hashes(std::span<const int32_t> tokens, int block_size, std::vector<uint64_t>& hashes);

}  // namespace gs
