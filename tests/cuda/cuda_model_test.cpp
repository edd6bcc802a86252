// The model on the GPU against the references: in f32 (stories260K's own dtype) HF's logits to
// 1e-4 and its greedy tokens exactly in every cudagraph mode; in bf16 the CPU backend's logits
// within bf16 tolerance (relative L2 < 2e-2) and every mode's greedy tokens equal to NONE's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attention/cuda/cuda_attention.h"
#include "cuda_test_util.h"
#include "device_model.h"
#include "golden.h"
#include "ops/cuda/cuda_backend.h"
#include "runner/serving_sim.h"
#include "test_paths.h"

namespace gs {
namespace {

std::unique_ptr<AttentionBackend> cpu_attention(Backend& b, const AttentionShape& s) {
  return make_cpu_attention(b, s);
}
std::unique_ptr<AttentionBackend> cuda_attention(Backend& b, const AttentionShape& s) {
  return make_cuda_attention(b, s);
}

test::DeviceModel on_gpu(const ModelSource& src, DType dtype, int max_tokens = 128) {
  return test::DeviceModel(make_cuda_backend(0, dtype), src, max_tokens, cuda_attention);
}
test::DeviceModel on_cpu(const ModelSource& src, int max_tokens = 128) {
  return test::DeviceModel(make_cpu_backend(), src, max_tokens, cpu_attention);
}

const char* kPrompts[] = {"bos_only", "short", "sentence", "long", "punctuation", "digits", "non_ascii", "emoji"};

// f32 on the GPU computes what HF computes in f32 (no TF32): 1e-4; bf16 storage: 2e-2.
TEST(CudaModel, Stories260KLogitsMatchHuggingFace) {
  GS_REQUIRE_GPU();
  ModelSource src{.dir = test::stories260k_dir().string(), .preset = {}, .quantization = {}};
  for (auto [dtype, tol] : {std::pair{DType::F32, 1e-4}, {DType::BF16, 2e-2}}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto gpu = on_gpu(src, dtype);
    for (const char* name : kPrompts) {
      SCOPED_TRACE(name);
      const auto g = test::stories_golden(name);
      const auto logits = gpu.prefill(g["input_ids"].get<std::vector<int32_t>>());
      EXPECT_LT(test::rel_l2(logits.back(), g["last_logits"].get<std::vector<float>>()), tol);
    }
    const auto g = test::stories_golden("full_logits_20");
    const auto logits = gpu.prefill(g["input_ids"].get<std::vector<int32_t>>());
    const auto ref = g["logits"].get<std::vector<std::vector<float>>>();
    ASSERT_EQ(logits.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_LT(test::rel_l2(logits[i], ref[i]), tol) << "position " << i;
  }
}

TEST(CudaModel, DummyPresetsMatchTheCpuReference) {
  GS_REQUIRE_GPU();
  const std::vector<int32_t> prompt{1, 17, 254, 3, 99, 42, 7, 128, 5, 200, 31, 64};
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3", "smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b"}) {
    SCOPED_TRACE(preset);
    ModelSource src;
    src.dummy = true, src.preset = preset, src.seed = 7;
    const auto cpu = on_cpu(src, 16).prefill(prompt);
    const auto gpu = on_gpu(src, DType::BF16, 16).prefill(prompt);
    for (size_t i = 0; i < prompt.size(); ++i) EXPECT_LT(test::rel_l2(gpu[i], cpu[i]), 2e-2) << "position " << i;
  }
}

RunnerConfig gpu_config(CUDAGraphMode mode, const std::string& dtype = "auto") {
  RunnerConfig c;
  c.dtype = dtype;
  c.model = test::stories260k_dir().string();
  c.device = "cuda";
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.kv_cache_memory_bytes = size_t(16) << 20;
  c.compilation.cudagraph_mode = mode;
  c.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16};
  return c;
}

// All eight golden prompts arriving over time, chunked under a 24-token budget.
std::vector<test::SimRequest> workload() {
  std::vector<test::SimRequest> reqs;
  int arrival = 0;
  for (const char* name : kPrompts) {
    reqs.push_back(
        test::greedy_request(test::stories_golden(name)["input_ids"].get<std::vector<int32_t>>(), 64, arrival));
    arrival += 2;
  }
  return reqs;
}

const CUDAGraphMode kModes[] = {CUDAGraphMode::NONE, CUDAGraphMode::PIECEWISE, CUDAGraphMode::FULL,
                                CUDAGraphMode::FULL_DECODE_ONLY, CUDAGraphMode::FULL_AND_PIECEWISE};

// dtype auto: stories260K is an f32 checkpoint, so it runs in f32 and must give HF's tokens.
TEST(CudaModel, EveryGraphModeServesTheGoldenGreedyTokens) {
  GS_REQUIRE_GPU();
  const auto reqs = workload();
  for (CUDAGraphMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    ModelRunner runner(gpu_config(mode));
    const auto res = test::simulate(runner, reqs, 24);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto want = test::stories_golden(kPrompts[i])["greedy_output_ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(res.outputs[i], want) << kPrompts[i];
    }
    const RunnerStats s = runner.stats();
    EXPECT_EQ(s.graph_captures_after_startup, 0u);
    EXPECT_EQ(s.steps_full > 0, has_full_cudagraphs(mode));
    EXPECT_EQ(s.steps_piecewise > 0, has_piecewise_cudagraphs(mode));
  }
}

// In bf16 the tokens may drift from f32's, but never between modes: each equals NONE's.
TEST(CudaModel, Bf16EveryGraphModeServesNonesGreedyTokens) {
  GS_REQUIRE_GPU();
  const auto reqs = workload();
  std::vector<std::vector<int32_t>> none;
  for (CUDAGraphMode mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    ModelRunner runner(gpu_config(mode, "bfloat16"));
    const auto res = test::simulate(runner, reqs, 24);
    if (mode == CUDAGraphMode::NONE) none = res.outputs;
    ASSERT_EQ(res.outputs.size(), none.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(res.outputs[i], none[i]) << kPrompts[i];
    EXPECT_EQ(runner.stats().graph_captures_after_startup, 0u);
  }
}

}  // namespace
}  // namespace gs
