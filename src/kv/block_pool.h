// BlockPool: the paged KV cache's fixed-size blocks, handed out from a free list with
// reference counts (a block shared by several requests, e.g. a cached prefix, is freed when
// its last holder lets go).
//
// Only bookkeeping lives here: block ids index the runner's KV tensors. Not thread-safe.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace gs {

using BlockId = int32_t;

class BlockPool {
 public:
  // num_blocks >= 1, block_size >= 1 (tokens per block).
  BlockPool(int num_blocks, int block_size);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_blocks() - num_free(); }
  // Blocks needed to hold `num_tokens` tokens.
  int blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Takes `n` free blocks (ref count 1 each), or none at all when fewer than `n` are free.
  std::optional<std::vector<BlockId>> allocate(int n);
  // Adds a holder to an allocated block (prefix sharing).
  void retain(BlockId id);
  // Drops one holder; the block returns to the free list when none is left. Freeing a block
  // that is already free throws (a double free is a bookkeeping bug, never silently ignored).
  void release(BlockId id);
  int ref_count(BlockId id) const;

 private:
  void check_id(BlockId id) const;

  int block_size_;
  std::vector<int> ref_counts_;
  // FIFO free list: recently freed blocks are reused last, which keeps their contents (and, once
  // prefix caching lands, their hashes) valid for as long as possible.
  std::deque<BlockId> free_;
};

}  // namespace gs
