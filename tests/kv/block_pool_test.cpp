// BlockPool and BlockTable: free-list, reference-count and exhaustion invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/prefix_hash.h"

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

namespace gs {
namespace {

TEST(PrefixCache, FreedBlocksStayCachedUntilReused) {
  BlockPool pool(3, 4);
  BlockId a = (*pool.allocate(1))[0];
  pool.register_hash(a, 111);
  EXPECT_EQ(pool.lookup(111), a);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.lookup(111), a) << "a freed block keeps its prefix";
  pool.retain(a);  // taken back from the cache
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.ref_count(a), 1);
  pool.release(a);
  // The least recently freed blocks are reused first; `a` (freed last) goes last and loses
  // its hash then.
  auto all = pool.allocate(3);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->back(), a);
  EXPECT_FALSE(pool.lookup(111));
  for (BlockId id : *all) pool.release(id);
}

TEST(PrefixCache, FirstRegistrationWinsAndFreeBlocksCannotRegister) {
  BlockPool pool(3, 4);
  auto ids = *pool.allocate(2);
  pool.register_hash(ids[0], 7);
  pool.register_hash(ids[1], 7);
  EXPECT_EQ(pool.lookup(7), ids[0]);
  pool.release(ids[1]);
  EXPECT_THROW(pool.register_hash(ids[1], 8), Error);
  EXPECT_THROW(pool.retain(ids[1]), Error) << "free and uncached";
  BlockTable t;
  t.append_cached(pool, ids[0]);
  EXPECT_EQ(pool.ref_count(ids[0]), 2);
  t.release_all(pool);
  pool.release(ids[0]);
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(PrefixCache, HashesChainOverWholePrefix) {
  std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9}, b{1, 2, 3, 4, 5, 6, 7, 0};
  std::vector<uint64_t> ha, hb;
  extend_prefix_hashes(a, 4, ha);
  extend_prefix_hashes(b, 4, hb);
  ASSERT_EQ(ha.size(), 2u);
  ASSERT_EQ(hb.size(), 2u);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  std::vector<int32_t> c{9, 9, 9, 9, 5, 6, 7, 8};  // same second block, other prefix
  std::vector<uint64_t> hc;
  extend_prefix_hashes(c, 4, hc);
  EXPECT_NE(hc[1], ha[1]);
  a.insert(a.end(), {10, 11, 12});
  extend_prefix_hashes(a, 4, ha);  // extends, keeping the first two
  EXPECT_EQ(ha.size(), 3u);
  EXPECT_EQ(ha[0], hb[0]);
}

}  // namespace
}  // namespace gs
