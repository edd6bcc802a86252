// select_attention_kernel (attention/attention_kernel_selection.h): which kernel each launch of the
// supported model shapes gets under the default options, and what each option changes.
#include "attention/attention_kernel_selection.h"

#include <gtest/gtest.h>

#include <vector>

namespace gs {
namespace {

using K = AttentionKernel;

// A bf16 launch of hq / hkv heads at head dim D: requests rows, longest query.
AttentionLaunch launch(int hq, int hkv, int D, int requests, int max_query_len) {
  AttentionLaunch l;
  l.num_heads = hq, l.num_kv_heads = hkv, l.head_dim = D;
  l.num_reqs_padded = requests, l.max_query_len = max_query_len;
  return l;
}

K pick(const AttentionLaunch& l, const AttentionKernelOptions& o = {}) { return select_attention_kernel(l, o); }

TEST(AttentionKernelSelection, LongQueriesRunThePrefillKernel) {
  EXPECT_EQ(pick(launch(32, 8, 64, 1, kPrefillMinQueryLen)), K::TensorCorePrefill);
  EXPECT_EQ(pick(launch(32, 8, 128, 7, 2048)), K::TensorCorePrefill);
  EXPECT_EQ(pick(launch(64, 1, 64, 3, 100)), K::TensorCorePrefill);  // a group of 64: one tile's rows
  // One token short of the prefill tile: a decode kernel.
  EXPECT_EQ(pick(launch(32, 8, 64, 4, kPrefillMinQueryLen - 1)), K::TensorCoreDecode);
}

// llama3.2-1b (32 / 8 heads, D 64) and llama3.1-8b (32 / 8, D 128) decode at every batch size on
// the keys-as-rows kernel; speculative verification (several queries a request) on the tensor-core
// decode kernel.
TEST(AttentionKernelSelection, SingleTokenDecodeRunsKeysAsRows) {
  for (int D : {64, 128})
    for (int bs : {1, 8, 32, 128, 512}) {
      EXPECT_EQ(pick(launch(32, 8, D, bs, 1)), K::KeysAsRowsDecode) << D << " " << bs;
      EXPECT_EQ(pick(launch(32, 8, D, bs, 4)), K::TensorCoreDecode) << D << " " << bs;
    }
  // Groups past the keys-as-rows tile's 8 columns: the tensor-core decode kernel.
  EXPECT_EQ(pick(launch(kKeysAsRowsMaxGroup * 4, 2, 64, 1, 1)), K::TensorCoreDecode);
  EXPECT_EQ(pick(launch(kKeysAsRowsMaxGroup * 2, 1, 64, 1, 1)), K::TensorCoreDecode);
  EXPECT_EQ(pick(launch(kKeysAsRowsMaxGroup, 1, 64, 1, 1)), K::KeysAsRowsDecode);
}

// Head dim 128 with a group of at most 2 from 512 to 767 (request, kv head) pairs: the warp-per-pair
// kernel, one query a request or several; never at head dim 64 or larger groups; from 768 pairs
// keys-as-rows (one query a request) or the tensor-core kernel.
TEST(AttentionKernelSelection, WideDecodeAtSmallGroupsRunsWarpPerPair) {
  const AttentionKernelOptions o;
  const int pairs = o.warp_per_pair_min_pairs, most = o.warp_per_pair_max_pairs;
  ASSERT_EQ(pairs, 512);
  ASSERT_EQ(most, 768);
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8, 1)), K::WarpPerPairDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8, 4)), K::WarpPerPairDecode);
  EXPECT_EQ(pick(launch(8, 8, 128, pairs / 8, 1)), K::WarpPerPairDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, most / 8 - 1, 1)), K::WarpPerPairDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8 - 1, 1)), K::KeysAsRowsDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8 - 1, 4)), K::TensorCoreDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, most / 8, 1)), K::KeysAsRowsDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, most / 8, 4)), K::TensorCoreDecode);
  EXPECT_EQ(pick(launch(32, 8, 128, pairs / 8, 1)), K::KeysAsRowsDecode);  // group 4
  EXPECT_EQ(pick(launch(16, 8, 64, pairs / 8, 1)), K::KeysAsRowsDecode);   // head dim 64
  AttentionKernelOptions never;
  never.warp_per_pair_min_pairs = 0;
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8, 1), never), K::KeysAsRowsDecode);
  AttentionKernelOptions always;
  always.warp_per_pair_min_pairs = 1;
  always.warp_per_pair_max_pairs = 0;
  EXPECT_EQ(pick(launch(16, 8, 128, 1, 1), always), K::WarpPerPairDecode);
  EXPECT_EQ(pick(launch(16, 8, 128, 1024, 1), always), K::WarpPerPairDecode);
}

// What the tensor-core kernels do not hold goes to flash-decoding: f32, head dims other than 64 and
// 128, soft-capping (Gemma 2), attention sinks (gpt-oss) below the prefill kernel's query length,
// unaligned buffers, groups over a tile's rows, no requests at all.
TEST(AttentionKernelSelection, WhatTensorCoresDoNotHoldRunsFlashDecoding) {
  for (int q : {1, 4, 100}) {
    AttentionLaunch f32 = launch(32, 8, 64, 4, q);
    f32.bf16 = false;
    EXPECT_EQ(pick(f32), K::FlashDecoding);
    EXPECT_EQ(pick(launch(8, 4, 256, 4, q)), K::FlashDecoding);
    EXPECT_EQ(pick(launch(8, 4, 96, 4, q)), K::FlashDecoding);
    AttentionLaunch capped = launch(8, 4, 128, 4, q);
    capped.softcap = 50.0f;
    EXPECT_EQ(pick(capped), K::FlashDecoding);
    AttentionLaunch sinks = launch(64, 8, 64, 4, q);  // gpt-oss: the prefill kernel adds them
    sinks.sinks = true;
    EXPECT_EQ(pick(sinks), q >= kPrefillMinQueryLen ? K::TensorCorePrefill : K::FlashDecoding);
    EXPECT_FALSE(cascade_attention_fits(sinks, AttentionKernelOptions{}));
    AttentionKernelOptions off;
    off.tensor_core = false;
    EXPECT_EQ(select_attention_kernel(sinks, off), K::FlashDecoding);
    AttentionLaunch unaligned = launch(32, 8, 64, 4, q);
    unaligned.aligned16 = false;
    EXPECT_EQ(pick(unaligned), K::FlashDecoding);
    EXPECT_EQ(pick(launch(kTensorCoreMaxGroup * 2, 1, 64, 4, q)), K::FlashDecoding);
    EXPECT_EQ(pick(launch(12, 8, 64, 4, q)), K::FlashDecoding);  // not a GQA grouping
  }
  EXPECT_EQ(pick(launch(32, 8, 64, 0, 4)), K::FlashDecoding);
}

// Cascade launches run on the tensor-core kernels: the suffix on the prefill kernel for long
// queries, else on the tensor-core decode kernel (single-token decode included); launches the
// tensor-core kernels do not hold, or with them off, do not cascade.
TEST(AttentionKernelSelection, CascadeRunsOnTensorCores) {
  const AttentionKernelOptions on;
  AttentionKernelOptions off;
  off.tensor_core = false;
  EXPECT_TRUE(cascade_attention_fits(launch(32, 8, 128, 64, 1), on));
  EXPECT_FALSE(cascade_attention_fits(launch(32, 8, 128, 64, 1), off));
  AttentionLaunch f32 = launch(32, 8, 64, 8, 1);
  f32.bf16 = false;
  EXPECT_FALSE(cascade_attention_fits(f32, on));
  EXPECT_FALSE(cascade_attention_fits(launch(8, 4, 256, 8, 1), on));
  EXPECT_EQ(select_cascade_suffix_kernel(launch(32, 8, 128, 64, 1)), K::TensorCoreDecode);
  EXPECT_EQ(select_cascade_suffix_kernel(launch(32, 8, 128, 8, kPrefillMinQueryLen - 1)), K::TensorCoreDecode);
  EXPECT_EQ(select_cascade_suffix_kernel(launch(32, 8, 64, 8, kPrefillMinQueryLen)), K::TensorCorePrefill);
}

TEST(AttentionKernelSelection, OptionsTurnKernelsOff) {
  AttentionKernelOptions no_tensor_cores;
  no_tensor_cores.tensor_core = false;
  for (int q : {1, 4, 512}) EXPECT_EQ(pick(launch(32, 8, 64, 8, q), no_tensor_cores), K::FlashDecoding);
  AttentionKernelOptions no_tc_decode;
  no_tc_decode.tensor_core_decode = false;
  EXPECT_EQ(pick(launch(32, 8, 64, 8, 512), no_tc_decode), K::TensorCorePrefill);
  EXPECT_EQ(pick(launch(32, 8, 64, 8, 4), no_tc_decode), K::FlashDecoding);
  EXPECT_EQ(pick(launch(32, 8, 64, 8, 1), no_tc_decode), K::KeysAsRowsDecode);
  AttentionKernelOptions no_keys_as_rows;
  no_keys_as_rows.keys_as_rows_decode = false;
  EXPECT_EQ(pick(launch(32, 8, 64, 8, 1), no_keys_as_rows), K::TensorCoreDecode);
}

// An e4m3 cache (--kv-cache-dtype fp8) runs only on the kernels that widen it: prefill, keys-as-rows
// for single-token decode, the tensor-core decode kernel otherwise; never warp-per-pair or
// flash-decoding, whatever the options say; and it never cascades.
TEST(AttentionKernelSelection, Fp8CacheRunsTheTensorCoreKernels) {
  auto fp8 = [](AttentionLaunch l) {
    l.fp8_cache = true;
    return l;
  };
  const int pairs = AttentionKernelOptions{}.warp_per_pair_min_pairs;
  EXPECT_EQ(pick(fp8(launch(32, 8, 128, 7, 2048))), K::TensorCorePrefill);
  EXPECT_EQ(pick(fp8(launch(32, 8, 128, 32, 1))), K::KeysAsRowsDecode);
  EXPECT_EQ(pick(fp8(launch(32, 8, 64, 1, 4))), K::TensorCoreDecode);
  EXPECT_EQ(pick(fp8(launch(64, 4, 128, 1, 1))), K::TensorCoreDecode);  // group 16
  EXPECT_EQ(pick(launch(16, 8, 128, pairs / 8, 1)), K::WarpPerPairDecode);
  EXPECT_EQ(pick(fp8(launch(16, 8, 128, pairs / 8, 1))), K::KeysAsRowsDecode);
  AttentionKernelOptions off;
  off.tensor_core = false;
  off.keys_as_rows_decode = false;
  EXPECT_EQ(pick(fp8(launch(32, 8, 128, 32, 1)), off), K::KeysAsRowsDecode);
  EXPECT_TRUE(cascade_attention_fits(launch(32, 8, 128, 32, 1), {}));
  EXPECT_FALSE(cascade_attention_fits(fp8(launch(32, 8, 128, 32, 1)), {}));
}

// MLA's expanded form takes the batch's last run of long requests whose contexts fit the scratch.
TEST(AttentionKernelSelection, MlaExpandedFormTakesTheLastRunOfLongRequests) {
  const int L = kMlaExpandedMinQueryLen;
  // Two decodes, then prompts of L and L + 10 tokens: the prompts.
  EXPECT_EQ(mla_expanded_first_request(std::vector<int32_t>{0, 1, 2, 2 + L, 12 + 2 * L},
                                       std::vector<int32_t>{500, 40, L, L + 10}, 4, 1000),
            2);
  // A long chunk, a decode, a long prompt: only the prompt (the chunk before the decode stays absorbed).
  EXPECT_EQ(mla_expanded_first_request(std::vector<int32_t>{0, L, L + 1, 2 * L + 1}, std::vector<int32_t>{3 * L, 90, L},
                                       3, 1000),
            2);
  // A prompt one query short, or whose context exceeds the scratch, ends the run.
  EXPECT_EQ(mla_expanded_first_request(std::vector<int32_t>{0, L - 1}, std::vector<int32_t>{L - 1}, 1, 1000), 1);
  EXPECT_EQ(mla_expanded_first_request(std::vector<int32_t>{0, L, 2 * L}, std::vector<int32_t>{1001, 2 * L}, 2, 1000),
            1);
  // No host copies (a FULL graph's launch), or no scratch: none.
  EXPECT_EQ(mla_expanded_first_request({}, {}, 2, 1000), 2);
  EXPECT_EQ(mla_expanded_first_request(std::vector<int32_t>{0, L}, std::vector<int32_t>{L}, 1, 0), 1);
}

// DeepSeek-V2-Lite's row: the 576-value latent row and 16 heads of k_nope | v (256), bf16.
TEST(AttentionKernelSelection, MlaExpandedScratchHoldsTheLongestContextWithinItsBounds) {
  const int64_t row = 2 * (576 + 16 * 256);                        // 9,344 bytes
  EXPECT_EQ(mla_expanded_scratch_rows(row, 0, 128), 28672);        // unknown: the 256 MiB floor
  EXPECT_EQ(mla_expanded_scratch_rows(row, 4096, 128), 28672);     // short contexts share the floor
  EXPECT_EQ(mla_expanded_scratch_rows(row, 32768, 128), 32768);    // one request at the longest context
  EXPECT_EQ(mla_expanded_scratch_rows(row, 32769, 128), 32896);    // rounded up to the GEMMs' quantum
  EXPECT_EQ(mla_expanded_scratch_rows(row, 163840, 128), 114816);  // the 1 GiB cap
  EXPECT_LE(int64_t(mla_expanded_scratch_rows(row, 163840, 128)) * row, kMlaExpandedScratchMaxBytes);
}

}  // namespace
}  // namespace gs
