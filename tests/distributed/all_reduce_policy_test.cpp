// The all-reduce choice of a tensor-parallel group: when the custom all-reduce is on, and which
// algorithm each message size gets (the GPU path itself runs in graphserve bench all-reduce).
#include <gtest/gtest.h>

#include "distributed/all_reduce_policy.h"

namespace gs {
namespace {

AllReduceGroupFacts one_host(int world) {
  AllReduceGroupFacts f;
  f.world = world;
  return f;
}

TEST(AllReducePolicy, OneHostWithPeerAccessUsesTheCustomPathUpToItsBuffer) {
  std::string why = "unset";
  const AllReducePolicy p = choose_all_reduce_policy(one_host(4), &why);
  EXPECT_TRUE(p.custom_available);
  EXPECT_EQ(why, "");
  EXPECT_EQ(choose_all_reduce(p, 8 * 1024), AllReduceAlgo::OneShot);  // llama3.1-8b bs 1: 4096 x bf16
  EXPECT_EQ(choose_all_reduce(p, p.one_shot_max_bytes), AllReduceAlgo::OneShot);
  EXPECT_EQ(choose_all_reduce(p, p.one_shot_max_bytes + 16), AllReduceAlgo::TwoShot);
  EXPECT_EQ(choose_all_reduce(p, p.custom_max_bytes), AllReduceAlgo::TwoShot);
  EXPECT_EQ(choose_all_reduce(p, p.custom_max_bytes + 16), AllReduceAlgo::Nccl);
  EXPECT_EQ(choose_all_reduce(p, 0), AllReduceAlgo::Nccl);
  EXPECT_EQ(choose_all_reduce(p, 8 * 1024 + 2), AllReduceAlgo::Nccl);  // not whole 16-byte packs
}

TEST(AllReducePolicy, TwoRanksUseOneShotForEveryCustomSizeMoreRanksSwitchToTwoShot) {
  const AllReducePolicy p2 = default_all_reduce_policy(2), p4 = default_all_reduce_policy(4);
  EXPECT_EQ(p2.one_shot_max_bytes, p2.custom_max_bytes);
  EXPECT_EQ(choose_all_reduce(p2, 8 << 20), AllReduceAlgo::OneShot);
  EXPECT_EQ(choose_all_reduce(p2, (8 << 20) + 16), AllReduceAlgo::Nccl);
  EXPECT_EQ(choose_all_reduce(p4, 512 * 1024), AllReduceAlgo::TwoShot);
  EXPECT_EQ(choose_all_reduce(p4, 256 * 1024), AllReduceAlgo::OneShot);
}

TEST(AllReducePolicy, EveryMissingFactFallsBackToNcclWithItsReason) {
  struct Case {
    void (*edit)(AllReduceGroupFacts&);
    const char* reason;
  };
  const Case cases[] = {
      {[](AllReduceGroupFacts& f) { f.disabled = true; }, "disabled"},
      {[](AllReduceGroupFacts& f) { f.cuda = false; }, "not a CUDA group"},
      {[](AllReduceGroupFacts& f) { f.same_host = false; }, "different hosts"},
      {[](AllReduceGroupFacts& f) { f.peers_reachable = false; }, "cannot map a peer"},
      {[](AllReduceGroupFacts& f) { f.supported_dtype = false; }, "neither bf16 nor f32"},
      {[](AllReduceGroupFacts& f) { f.world = 3; }, "3 ranks"},
      {[](AllReduceGroupFacts& f) { f.world = 16; }, "16 ranks"},
      {[](AllReduceGroupFacts& f) { f.world = 1; }, "single rank"},
  };
  for (const Case& c : cases) {
    AllReduceGroupFacts f = one_host(4);
    c.edit(f);
    std::string why;
    const AllReducePolicy p = choose_all_reduce_policy(f, &why);
    EXPECT_FALSE(p.custom_available) << c.reason;
    EXPECT_NE(why.find(c.reason), std::string::npos) << why;
    EXPECT_EQ(choose_all_reduce(p, 8 * 1024), AllReduceAlgo::Nccl);
    EXPECT_NE(describe_all_reduce_policy(p, why).find("NCCL for every size"), std::string::npos);
  }
}

TEST(AllReducePolicy, StartUpLineNamesEachSizeRange) {
  EXPECT_EQ(describe_all_reduce_policy(default_all_reduce_policy(4), ""),
            "custom one-shot up to 256 KiB, custom two-shot up to 8 MiB, NCCL above (and for sizes not a multiple of "
            "16 bytes); one-shot sizes up to 256 KiB fuse the residual add + RMSNorm after o_proj and down; the "
            "logits' column gather is custom up to 4 calls of 8 MiB");
  EXPECT_EQ(describe_all_reduce_policy(default_all_reduce_policy(2), ""),
            "custom one-shot up to 8 MiB, NCCL above (and for sizes not a multiple of 16 bytes); one-shot sizes up to "
            "256 KiB fuse the residual add + RMSNorm after o_proj and down; the logits' column gather is custom up "
            "to 4 calls of 8 MiB");
  EXPECT_STREQ(all_reduce_algo_name(AllReduceAlgo::TwoShot), "two-shot");
}

TEST(AllReducePolicy, FusedNormOnlyWhereOneShotServesWholeChunkRows) {
  const AllReducePolicy two = default_all_reduce_policy(2), four = default_all_reduce_policy(4);
  // llama3.1-8b decode rows (hidden 4096, bf16): batches up to 32 rows (256 KiB).
  EXPECT_TRUE(fuse_all_reduce_add_rms_norm(two, 1, 4096, 2));
  EXPECT_TRUE(fuse_all_reduce_add_rms_norm(two, 32, 4096, 2));
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 33, 4096, 2));    // one-shot, but past kFusedNormMaxBytes
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 2048, 4096, 2));  // NCCL's size
  EXPECT_TRUE(fuse_all_reduce_add_rms_norm(two, 16, 4096, 4));     // f32 rows
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 17, 4096, 4));
  // 4 ranks: one-shot up to 256 KiB too, two-shot above is not fused.
  EXPECT_TRUE(fuse_all_reduce_add_rms_norm(four, 32, 4096, 2));
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(four, 33, 4096, 2));
  // Rows must be whole 8-element chunks that fit the kernel's registers.
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 1, 4100, 2));
  EXPECT_TRUE(fuse_all_reduce_add_rms_norm(two, 1, kFusedNormMaxHidden, 2));
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 1, kFusedNormMaxHidden + 8, 2));
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(two, 0, 4096, 2));
  EXPECT_FALSE(fuse_all_reduce_add_rms_norm(AllReducePolicy{}, 1, 4096, 2));  // no custom path
}

TEST(AllReducePolicy, LogitsGatherIsCustomInAtMostFourCallsOfTheBuffer) {
  const AllReducePolicy two = default_all_reduce_policy(2), four = default_all_reduce_policy(4);
  // llama3.1-8b's logits at TP=2: a rank's 64128 f32 columns, 513 KB of every rank's region a
  // row: 16 rows fit the 8 MiB buffer, so up to 64 rows go in 4 calls.
  const size_t row = 64128 * 4;
  EXPECT_EQ(custom_gather_rows(two, 2, 1, row), 1);
  EXPECT_EQ(custom_gather_rows(two, 2, 16, row), 16);
  EXPECT_EQ(custom_gather_rows(two, 2, 32, row), 16);  // 2 calls
  EXPECT_EQ(custom_gather_rows(two, 2, 64, row), 16);  // 4 calls
  EXPECT_EQ(custom_gather_rows(two, 2, 65, row), 0);   // 5 calls: NCCL
  EXPECT_EQ(custom_gather_rows(four, 4, 32, 32064 * 4), 16);
  EXPECT_EQ(custom_gather_rows(two, 2, 1, 64127 * 4), 0);          // rows of whole 16-byte packs only
  EXPECT_EQ(custom_gather_rows(two, 2, 1, size_t(8) << 20), 0);    // one row past the buffer
  EXPECT_EQ(custom_gather_rows(AllReducePolicy{}, 2, 1, row), 0);  // no custom path
}

}  // namespace
}  // namespace gs
