// build_host_batch / pad_host_batch: the step layout (ids, positions, slots, block tables) and its errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runner/host_batch.h"

namespace gs {
namespace {

HostBatchLimits limits() { return {4, 8, 32, 64, 4, 16}; }

TEST(HostBatch, PositionsSlotsAndOffsetsOfMixedPrefillAndDecode) {
  const std::vector<int32_t> a_tokens{10, 11, 12, 13, 14, 15}, a_blocks{3, 7};
  const std::vector<int32_t> b_tokens{20, 21, 22}, b_blocks{5};
  SamplingParams p;
  SchedulerOutput so;
  // a: decode of its 6th token (5 cached); b: a prefill chunk of 2 tokens.
  so.requests.push_back({1, &a_tokens, 5, 5, 1, &a_blocks, true, &p, 0, 0});
  so.requests.push_back({2, &b_tokens, 3, 0, 2, &b_blocks, false, &p, 0, 0});
  const HostBatch hb = build_host_batch(so, limits());
  EXPECT_EQ(hb.input_ids, (std::vector<int32_t>{15, 20, 21}));
  EXPECT_EQ(hb.positions, (std::vector<int32_t>{5, 0, 1}));
  EXPECT_EQ(hb.slot_mapping, (std::vector<int32_t>{7 * 4 + 1, 5 * 4 + 0, 5 * 4 + 1}));
  EXPECT_EQ(hb.query_start_loc, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(hb.seq_lens, (std::vector<int32_t>{6, 2}));
  EXPECT_EQ(hb.logits_rows, (std::vector<int32_t>{0}));
  EXPECT_EQ(hb.block_table_width, 2);  // a's 6 tokens need 2 blocks of 4, b's 2 tokens 1
  EXPECT_EQ(hb.block_table, (std::vector<int32_t>{3, 7, 5, 0}));
  EXPECT_EQ(hb.max_query_len, 2);
  EXPECT_FALSE(hb.uniform_decode(1));
}

// The table holds the blocks the tokens so far need, not every block a request owns (the
// scheduler may have allocated ahead) nor max_model_len / block_size columns.
TEST(HostBatch, BlockTableIsAsWideAsTheLongestRequestNeeds) {
  const std::vector<int32_t> a_tokens(9, 1), a_blocks{4, 2, 9, 11, 12}, b_tokens{1, 2}, b_blocks{6, 8};
  SamplingParams p;
  SchedulerOutput so;
  so.requests.push_back({1, &a_tokens, 9, 8, 1, &a_blocks, true, &p, 0, 0});  // 9 tokens: 3 blocks of 4
  so.requests.push_back({2, &b_tokens, 2, 1, 1, &b_blocks, true, &p, 0, 0});  // 2 tokens: 1 block
  const HostBatch hb = build_host_batch(so, limits());
  EXPECT_EQ(hb.block_table_width, 3);
  EXPECT_EQ(hb.block_table, (std::vector<int32_t>{4, 2, 9, 6, 8, 0}));
}

TEST(HostBatch, UniformDecodeFollowsVllm) {
  const std::vector<int32_t> t{1, 2, 3, 4}, blocks{0};
  SamplingParams p;
  SchedulerOutput so;
  so.requests.push_back({1, &t, 2, 3, 1, &blocks, true, &p, 0, 0});
  so.requests.push_back({2, &t, 2, 2, 1, &blocks, true, &p, 0, 0});
  EXPECT_TRUE(build_host_batch(so, limits()).uniform_decode(1));
  so.requests[1].num_new_tokens = 2;
  EXPECT_FALSE(build_host_batch(so, limits()).uniform_decode(1));
  so.requests[0].num_new_tokens = 2;
  so.requests[0].num_computed_tokens = 2;
  EXPECT_TRUE(build_host_batch(so, limits()).uniform_decode(2));
}

TEST(HostBatch, InconsistentRequestsAreErrors) {
  const std::vector<int32_t> t{1, 2, 3, 4, 5}, one_block{0}, bad_block{99};
  SamplingParams p;
  auto make = [&](int computed, int n, const std::vector<int32_t>* blocks) {
    SchedulerOutput so;
    so.requests.push_back({9, &t, 5, computed, n, blocks, true, &p, 0, 0});
    return so;
  };
  EXPECT_THROW(build_host_batch(make(0, 5, &one_block), limits()), Error);  // needs 2 blocks
  EXPECT_THROW(build_host_batch(make(4, 2, &one_block), limits()), Error);  // beyond known tokens
  EXPECT_THROW(build_host_batch(make(0, 1, &bad_block), limits()), Error);  // no such block
  EXPECT_THROW(build_host_batch(make(0, 0, &one_block), limits()), Error);  // nothing to compute
  EXPECT_NO_THROW(build_host_batch(make(0, 4, &one_block), limits()));
}

}  // namespace
}  // namespace gs

namespace gs {
namespace {

TEST(HostBatch, PaddingWritesNoKvAndAddsEmptyRequests) {
  const std::vector<int32_t> t{1, 2, 3}, blocks{2};
  SamplingParams p;
  SchedulerOutput so;
  so.requests.push_back({1, &t, 3, 2, 1, &blocks, true, &p, 0, 0});
  so.requests.push_back({2, &t, 3, 1, 1, &blocks, true, &p, 0, 0});
  HostBatch hb = build_host_batch(so, limits());
  pad_host_batch(hb, 4, 4);
  EXPECT_EQ(hb.num_actual_tokens, 2);
  EXPECT_EQ(hb.num_reqs, 2);
  EXPECT_EQ(hb.slot_mapping, (std::vector<int32_t>{2 * 4 + 2, 2 * 4 + 1, -1, -1}));
  EXPECT_EQ(hb.input_ids, (std::vector<int32_t>{3, 2, 0, 0}));
  EXPECT_EQ(hb.query_start_loc, (std::vector<int32_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(hb.seq_lens, (std::vector<int32_t>{3, 2, 0, 0}));
  EXPECT_THROW(pad_host_batch(hb, 1, 4), Error);
}

}  // namespace
}  // namespace gs
