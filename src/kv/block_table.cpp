#include "kv/block_table.h"

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
  for (BlockId id : ids_) pool.release(id);
  ids_.clear();
}

}  // namespace gs
