// has_lora in the dispatch key: with LoRA enabled every key exists twice (plain and has_lora),
// adapter batches dispatch to has_lora graphs and plain batches to the plain ones.
#include <gtest/gtest.h>

#include "cudagraph/cudagraph_dispatcher.h"

namespace gs {
namespace {

TEST(LoraDispatch, HasLoraKeysBesidePlainOnes) {
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(CUDAGraphMode::FULL_AND_PIECEWISE, {1, 2, 4, 8}, 1, 8, /*enable_lora=*/true);
  EXPECT_EQ(d.keys(CUDAGraphMode::FULL).size(), 8u);
  EXPECT_EQ(d.keys(CUDAGraphMode::PIECEWISE).size(), 8u);
  BatchDescriptor dec = BatchDescriptor::uniform_decode(3, 1);
  auto [m1, plain] = d.dispatch(dec);
  EXPECT_EQ(m1, CUDAGraphMode::FULL);
  EXPECT_FALSE(plain.has_lora);
  EXPECT_EQ(plain.num_tokens, 4);
  dec.has_lora = true;
  auto [m2, lora] = d.dispatch(dec);
  EXPECT_EQ(m2, CUDAGraphMode::FULL);
  EXPECT_TRUE(lora.has_lora);
  auto [m3, mixed] = d.dispatch(BatchDescriptor::mixed(5, /*has_lora=*/true));
  EXPECT_EQ(m3, CUDAGraphMode::PIECEWISE);
  EXPECT_TRUE(mixed.has_lora);
  EXPECT_EQ(mixed.num_tokens, 8);
}

TEST(LoraDispatch, WithoutLoraNoHasLoraKeys) {
  CudagraphDispatcher d;
  d.initialize_cudagraph_keys(CUDAGraphMode::FULL_AND_PIECEWISE, {1, 2, 4, 8}, 1, 8);
  EXPECT_EQ(d.keys(CUDAGraphMode::FULL).size(), 4u);
  auto [mode, desc] = d.dispatch(BatchDescriptor::uniform_decode(3, 1, /*has_lora=*/true));
  EXPECT_EQ(mode, CUDAGraphMode::NONE) << "no has_lora graph exists";
}

}  // namespace
}  // namespace gs
