// Implements kv/prefix_hash.h.
#include "kv/prefix_hash.h"

#include <xxhash.h>

namespace gs {

void extend_prefix_hashes(std::span<const int32_t> tokens, int block_size, std::vector<uint64_t>& hashes,
                          uint64_t extra_key) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  for (size_t i = hashes.size(); i < full; ++i) {
    const uint64_t root =
        extra_key == 0 ? 0x9e3779b97f4a7c15ull : XXH3_64bits_withSeed(&extra_key, sizeof extra_key, 1);
    const uint64_t parent = i == 0 ? root : hashes[i - 1];
    hashes.push_back(XXH3_64bits_withSeed(tokens.data() + i * block_size, sizeof(int32_t) * block_size, parent));
  }
}

}  // namespace gs
