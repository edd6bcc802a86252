// Implements kv/block_table.h (BlockTable).
#include "kv/block_table.h"

#include <algorithm>

namespace gs {

bool BlockTable::reserve(BlockPool& pool, int num_tokens) {
  int missing = pool.blocks_for(num_tokens) - num_blocks();
  if (missing <= 0) return true;
  auto fresh = pool.allocate(missing);
  if (!fresh) return false;
  ids_.insert(ids_.end(), fresh->begin(), fresh->end());
  return true;
}

void BlockTable::append_cached(BlockPool& pool, BlockId id) {
  pool.retain(id);
  ids_.push_back(id);
}

void BlockTable::release_all(BlockPool& pool) {
  for (BlockId id : ids_)
    if (id != kFreedBlock) pool.release(id);
  ids_.clear();
  num_freed_ = 0;
}

int BlockTable::free_before(BlockPool& pool, int first_needed) {
  const int end = std::min(num_blocks(), std::max(0, first_needed) / pool.block_size());
  int released = 0;
  for (; num_freed_ < end; ++num_freed_) {
    pool.release(ids_[size_t(num_freed_)]);
    ids_[size_t(num_freed_)] = kFreedBlock;
    ++released;
  }
  return released;
}

}  // namespace gs
