// Implements kv/block_pool.h (BlockPool).
#include "kv/block_pool.h"

#include "core/error.h"

namespace gs {

BlockPool::BlockPool(int num_blocks, int block_size) : block_size_(block_size) {
  GS_CHECK(num_blocks >= 1, "the KV cache needs at least 1 block, got {} (raise --kv-cache-memory)", num_blocks);
  GS_CHECK(block_size >= 1, "block size must be >= 1, got {}", block_size);
  blocks_.resize(num_blocks);
  for (BlockId i = 0; i < num_blocks; ++i) blocks_[i].free_pos = free_.insert(free_.end(), i);
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int n) {
  GS_CHECK(n >= 0, "cannot allocate {} blocks", n);
  if (n > num_free()) return std::nullopt;
  std::vector<BlockId> ids;
  ids.reserve(n);
  for (int i = 0; i < n; ++i) {
    BlockId id = free_.front();
    free_.pop_front();
    Block& b = blocks_[id];
    if (b.hash) {  // its cached prefix is about to be overwritten
      cached_.erase(*b.hash);
      b.hash.reset();
    }
    b.ref_count = 1;
    ids.push_back(id);
  }
  return ids;
}

void BlockPool::retain(BlockId id) {
  check_id(id);
  Block& b = blocks_[id];
  if (b.ref_count == 0) {
    GS_CHECK(b.hash.has_value(), "KV block {} is free and holds no cached prefix", id);
    free_.erase(b.free_pos);
  }
  ++b.ref_count;
}

void BlockPool::release(BlockId id) {
  check_id(id);
  Block& b = blocks_[id];
  GS_CHECK(b.ref_count > 0, "KV block {} freed twice", id);
  if (--b.ref_count == 0) b.free_pos = free_.insert(free_.end(), id);
}

int BlockPool::ref_count(BlockId id) const {
  check_id(id);
  return blocks_[id].ref_count;
}

void BlockPool::register_hash(BlockId id, uint64_t hash) {
  check_id(id);
  Block& b = blocks_[id];
  GS_CHECK(b.ref_count > 0, "KV block {} is free: only held blocks can be registered", id);
  if (b.hash || cached_.count(hash)) return;
  b.hash = hash;
  cached_.emplace(hash, id);
}

std::optional<BlockId> BlockPool::lookup(uint64_t hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::check_id(BlockId id) const {
  GS_CHECK(id >= 0 && id < num_blocks(), "KV block id {} out of range [0, {})", id, num_blocks());
}

}  // namespace gs
