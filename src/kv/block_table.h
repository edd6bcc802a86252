// BlockTable: the KV blocks of one request, in token order (token t lives in block
// ids()[t / block_size] at offset t % block_size). Grows as tokens are computed; gives every
// block back on finish, abort or preemption. With sliding-window attention, leading blocks that
// no query reads any more are given back early and their entries become kFreedBlock.
#pragma once
#include <cstdint>
#include <vector>

#include "kv/block_pool.h"

namespace gs {

// A table entry whose block was given back (it lay wholly outside every layer's window).
inline constexpr int32_t kFreedBlock = -1;

class BlockTable {
 public:
  BlockTable() = default;
  // Not copyable: two tables holding the same blocks without a retain would double-free.
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  BlockTable(BlockTable&&) = default;
  BlockTable& operator=(BlockTable&&) = default;

  // Makes room for `num_tokens` tokens in total, allocating what is missing from `pool`.
  // All or nothing: returns false (and allocates nothing) when the pool has too few blocks.
  bool reserve(BlockPool& pool, int num_tokens);
  // Appends a cached block (prefix caching), taking a reference on it. The table must hold
  // only full blocks so far.
  void append_cached(BlockPool& pool, BlockId id);
  // Releases every block to `pool`; the table is empty afterwards.
  void release_all(BlockPool& pool);
  // Gives back the blocks that hold only positions < `first_needed` (sliding windows: no query
  // reads them any more); their entries become kFreedBlock, so indexing stays by position.
  // Returns how many blocks were released.
  int free_before(BlockPool& pool, int first_needed);
  int num_freed() const { return num_freed_; }  // leading entries that are kFreedBlock

  const std::vector<int32_t>& ids() const { return ids_; }
  int num_blocks() const { return static_cast<int>(ids_.size()); }
  int capacity(const BlockPool& pool) const { return num_blocks() * pool.block_size(); }

 private:
  std::vector<int32_t> ids_;
  int num_freed_ = 0;
};

}  // namespace gs
