// EngineConfig validation: errors name the flag to fix.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "executor/engine_config.h"

namespace gs {
namespace {

void expect_invalid(const std::function<void(EngineConfig&)>& mutate, const std::string& needle) {
  EngineConfig c;
  mutate(c);
  try {
    c.validate();
    ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(EngineConfig, ValidationNamesTheFlag) {
  EngineConfig{}.validate();
  expect_invalid([](EngineConfig& c) { c.load_format = "pt"; }, "--load-format must be one of auto");
  expect_invalid([](EngineConfig& c) { c.device = "tpu"; }, "--device");
  expect_invalid([](EngineConfig& c) { c.dtype = "int8"; }, "--dtype");
  expect_invalid([](EngineConfig& c) { c.max_num_seqs = 0; }, "--max-num-seqs must be >= 1");
  expect_invalid([](EngineConfig& c) { c.max_num_batched_tokens = 0; }, "--max-num-batched-tokens");
  expect_invalid([](EngineConfig& c) { c.max_model_len = -1; }, "--max-model-len");
  expect_invalid([](EngineConfig& c) { c.block_size = 0; }, "--block-size must be in [1, 1024]");
  expect_invalid([](EngineConfig& c) { c.gpu_memory_utilization = 1.5f; }, "--gpu-memory-utilization");
  expect_invalid([](EngineConfig& c) { c.tensor_parallel_size = 0; }, "--tensor-parallel-size");
}

}  // namespace
}  // namespace gs
