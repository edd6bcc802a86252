#include "kv/block_pool.h"

#include "core/error.h"

namespace gs {

BlockPool::BlockPool(int num_blocks, int block_size) : block_size_(block_size) {
  GS_CHECK(num_blocks >= 1, "the KV cache needs at least 1 block, got {} (raise --kv-cache-memory)",
           num_blocks);
  GS_CHECK(block_size >= 1, "block size must be >= 1, got {}", block_size);
  ref_counts_.assign(num_blocks, 0);
  for (BlockId i = 0; i < num_blocks; ++i) free_.push_back(i);
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int n) {
  GS_CHECK(n >= 0, "cannot allocate {} blocks", n);
  if (n > num_free()) return std::nullopt;
  std::vector<BlockId> ids;
  ids.reserve(n);
  for (int i = 0; i < n; ++i) {
    BlockId id = free_.front();
    free_.pop_front();
    ref_counts_[id] = 1;
    ids.push_back(id);
  }
  return ids;
}

void BlockPool::retain(BlockId id) {
  check_id(id);
  GS_CHECK(ref_counts_[id] > 0, "KV block {} is free and cannot be shared", id);
  ++ref_counts_[id];
}

void BlockPool::release(BlockId id) {
  check_id(id);
  GS_CHECK(ref_counts_[id] > 0, "KV block {} freed twice", id);
  if (--ref_counts_[id] == 0) free_.push_back(id);
}

int BlockPool::ref_count(BlockId id) const {
  check_id(id);
  return ref_counts_[id];
}

void BlockPool::check_id(BlockId id) const {
  GS_CHECK(id >= 0 && id < num_blocks(), "KV block id {} out of range [0, {})", id, num_blocks());
}

}  // namespace gs
