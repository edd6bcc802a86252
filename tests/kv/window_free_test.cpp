// BlockTable::free_before: sliding-window models give back the blocks no query reads any more,
// keeping positional indexing (freed entries are kFreedBlock) and releasing each block once.
#include <gtest/gtest.h>

#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace gs {
namespace {

TEST(BlockTableWindow, FreesOnlyWholeLeadingBlocksOnce) {
  BlockPool pool(8, 4);
  BlockTable t;
  ASSERT_TRUE(t.reserve(pool, 20));  // 5 blocks
  const auto before = t.ids();
  EXPECT_EQ(t.free_before(pool, 3), 0) << "position 3 is still in block 0";
  EXPECT_EQ(t.free_before(pool, 9), 2) << "blocks 0 and 1 hold positions < 8 only";
  EXPECT_EQ(t.num_freed(), 2);
  EXPECT_EQ(pool.num_used(), 3);
  EXPECT_EQ(t.ids()[0], kFreedBlock);
  EXPECT_EQ(t.ids()[1], kFreedBlock);
  EXPECT_EQ(t.ids()[2], before[2]) << "later entries keep their positions";
  EXPECT_EQ(t.free_before(pool, 9), 0) << "a freed block is never released twice";
  EXPECT_EQ(t.free_before(pool, 1000), 3) << "never past the table's end";
  ASSERT_TRUE(t.reserve(pool, 24));  // grows at the end, after the freed entries
  EXPECT_EQ(t.num_blocks(), 6);
  t.release_all(pool);
  EXPECT_EQ(pool.num_free(), pool.num_blocks());
  EXPECT_EQ(t.num_freed(), 0);
}

TEST(BlockTableWindow, NegativeBoundFreesNothing) {
  BlockPool pool(2, 4);
  BlockTable t;
  ASSERT_TRUE(t.reserve(pool, 8));
  EXPECT_EQ(t.free_before(pool, -20), 0);
  EXPECT_EQ(pool.num_used(), 2);
  t.release_all(pool);
}

}  // namespace
}  // namespace gs
