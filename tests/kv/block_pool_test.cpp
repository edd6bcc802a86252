// BlockPool and BlockTable: free-list, reference-count and exhaustion invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace gs {
namespace {

TEST(BlockPool, AllocatesDistinctBlocksUntilExhausted) {
  BlockPool pool(4, 16);
  auto a = pool.allocate(3);
  ASSERT_TRUE(a);
  EXPECT_EQ(pool.num_free(), 1);
  std::set<BlockId> ids(a->begin(), a->end());
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_FALSE(pool.allocate(2)) << "all-or-nothing: 2 blocks requested, 1 free";
  EXPECT_EQ(pool.num_free(), 1) << "a failed allocation must not take blocks";
  auto b = pool.allocate(1);
  ASSERT_TRUE(b);
  EXPECT_FALSE(ids.count((*b)[0]));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.allocate(1));
  ASSERT_TRUE(pool.allocate(0));
}

TEST(BlockPool, RefCountsKeepSharedBlocksAlive) {
  BlockPool pool(2, 16);
  BlockId id = (*pool.allocate(1))[0];
  pool.retain(id);
  EXPECT_EQ(pool.ref_count(id), 2);
  pool.release(id);
  EXPECT_EQ(pool.num_free(), 1) << "still held once";
  pool.release(id);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.ref_count(id), 0);
}

TEST(BlockPool, RejectsDoubleFreeAndBadIds) {
  BlockPool pool(2, 16);
  BlockId id = (*pool.allocate(1))[0];
  pool.release(id);
  EXPECT_THROW(pool.release(id), Error);
  EXPECT_THROW(pool.retain(id), Error);
  EXPECT_THROW(pool.release(7), Error);
  EXPECT_THROW(pool.ref_count(-1), Error);
  EXPECT_THROW(BlockPool(0, 16), Error);
  EXPECT_THROW(BlockPool(4, 0), Error);
}

TEST(BlockPool, BlocksFor) {
  BlockPool pool(1, 16);
  EXPECT_EQ(pool.blocks_for(0), 0);
  EXPECT_EQ(pool.blocks_for(1), 1);
  EXPECT_EQ(pool.blocks_for(16), 1);
  EXPECT_EQ(pool.blocks_for(17), 2);
}

TEST(BlockTable, GrowsByWholeBlocksAndReleasesAll) {
  BlockPool pool(5, 4);
  BlockTable t;
  ASSERT_TRUE(t.reserve(pool, 1));
  EXPECT_EQ(t.num_blocks(), 1);
  ASSERT_TRUE(t.reserve(pool, 4));
  EXPECT_EQ(t.num_blocks(), 1) << "4 tokens fit in one block of 4";
  ASSERT_TRUE(t.reserve(pool, 9));
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(t.capacity(pool), 12);
  EXPECT_FALSE(t.reserve(pool, 21)) << "needs 6 blocks, the pool has 5";
  EXPECT_EQ(t.num_blocks(), 3) << "a failed reserve must not change the table";
  EXPECT_EQ(pool.num_free(), 2);
  ASSERT_TRUE(t.reserve(pool, 20));
  EXPECT_EQ(pool.num_free(), 0);
  t.release_all(pool);
  EXPECT_EQ(t.num_blocks(), 0);
  EXPECT_EQ(pool.num_free(), 5);
}

// Random reserve/release over many tables: blocks are never shared between tables and are
// all free at the end.
TEST(BlockTable, RandomWorkloadKeepsInvariants) {
  std::mt19937 rng(7);
  BlockPool pool(37, 8);
  std::vector<BlockTable> tables(10);
  std::vector<int> sizes(10, 0);
  for (int step = 0; step < 5000; ++step) {
    int i = static_cast<int>(rng() % tables.size());
    if (rng() % 5 == 0) {
      tables[i].release_all(pool);
      sizes[i] = 0;
    } else {
      int want = sizes[i] + static_cast<int>(rng() % 20);
      if (tables[i].reserve(pool, want)) sizes[i] = want;
    }
    std::set<BlockId> seen;
    int used = 0;
    for (size_t j = 0; j < tables.size(); ++j) {
      EXPECT_GE(tables[j].capacity(pool), sizes[j]);
      EXPECT_EQ(tables[j].num_blocks(), pool.blocks_for(sizes[j]));
      for (BlockId id : tables[j].ids()) {
        ASSERT_TRUE(seen.insert(id).second) << "block " << id << " in two tables";
        ASSERT_EQ(pool.ref_count(id), 1);
      }
      used += tables[j].num_blocks();
    }
    ASSERT_EQ(pool.num_used(), used);
  }
  for (auto& t : tables) t.release_all(pool);
  EXPECT_EQ(pool.num_free(), pool.num_blocks());
}

}  // namespace
}  // namespace gs
