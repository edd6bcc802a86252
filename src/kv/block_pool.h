// BlockPool: the paged KV cache's fixed-size blocks, handed out from a free list with
// reference counts (a block shared by several requests, e.g. a cached prefix, is freed when
// its last holder lets go).
//
// Prefix caching: a full block may be registered under the hash of its whole prefix (see
// prefix_hash.h). It keeps that hash while held and after it is freed, so a later request with
// the same prefix can take it back (`lookup` + `retain`) instead of recomputing it; the hash
// is dropped only when the block is handed out again for other tokens. Free blocks are reused
// least-recently-freed first, which keeps cached prefixes alive as long as possible.
//
// Only bookkeeping lives here: block ids index the runner's KV tensors. Not thread-safe.
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gs {

using BlockId = int32_t;

class BlockPool {
 public:
  // num_blocks >= 1, block_size >= 1 (tokens per block).
  BlockPool(int num_blocks, int block_size);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_blocks() - num_free(); }
  // Blocks needed to hold `num_tokens` tokens.
  int blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Takes `n` free blocks (ref count 1 each, no hash), or none at all when fewer are free.
  std::optional<std::vector<BlockId>> allocate(int n);
  // Adds a holder to a block: an allocated one, or a free one that still holds a cached
  // prefix (it leaves the free list).
  void retain(BlockId id);
  // Drops one holder; the block returns to the free list when none is left. Freeing a block
  // that is already free throws (a double free is a bookkeeping bug, never silently ignored).
  void release(BlockId id);
  int ref_count(BlockId id) const;

  // Registers a full, held block as holding the prefix with this hash (first block wins
  // when two hold the same prefix).
  void register_hash(BlockId id, uint64_t hash);
  // The block holding the prefix with this hash, if it is still cached.
  std::optional<BlockId> lookup(uint64_t hash) const;

 private:
  struct Block {
    int ref_count = 0;
    std::optional<uint64_t> hash;
    std::list<BlockId>::iterator free_pos;  // valid while ref_count == 0
  };
  void check_id(BlockId id) const;

  int block_size_;
  std::vector<Block> blocks_;
  std::list<BlockId> free_;  // front: freed longest ago, reused first
  std::unordered_map<uint64_t, BlockId> cached_;
};

}  // namespace gs
