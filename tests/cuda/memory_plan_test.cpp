// The memory plan with graphs (docs/CUDA_GRAPHS.md §8) and the GEMM tuning cache (§9) on the GPU:
// graph memory is reserved before the KV cache takes the rest, so even --gpu-memory-utilization
// 1.0 captures every graph; an impossible value is an error naming the flag; a second start reads
// the tuning cache, and a corrupt cache is tuned again and rewritten; the tuner's same-order filter
// reads each algorithm's fields.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/lt_gemm.h"
#include "runner/model_runner.h"
#include "test_paths.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

RunnerConfig stories_config() {
  RunnerConfig c;
  c.model = test::stories260k_dir().string();
  c.device = "cuda";
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  return c;
}

TEST(CudaMemoryPlan, WholeGpuForTheKvCacheStillCapturesEveryGraph) {
  GS_REQUIRE_GPU();
  RunnerConfig c = stories_config();
  c.gpu_memory_utilization = 1.0f;  // the KV cache gets everything but the graph reserve
  c.compilation.disable_compile_cache = true;
  ModelRunner runner(c);
  const RunnerStats st = runner.stats();
  EXPECT_EQ(st.resolved_mode, CUDAGraphMode::FULL_AND_PIECEWISE);
  EXPECT_GT(st.num_graphs, 0);
  EXPECT_GT(st.graph_memory_reserved_bytes, 0u);
  EXPECT_LE(st.graph_memory_bytes, st.graph_memory_reserved_bytes);
  EXPECT_GT(runner.num_kv_blocks(), 1000);
}

TEST(CudaMemoryPlan, ImpossibleUtilizationIsAnErrorNamingTheFlag) {
  GS_REQUIRE_GPU();
  RunnerConfig c = stories_config();
  c.gpu_memory_utilization = 0.001f;  // less than the CUDA context alone
  try {
    ModelRunner runner(c);
    FAIL() << "a runner started with --gpu-memory-utilization 0.001";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--gpu-memory-utilization 0.001"), std::string::npos) << m;
    EXPECT_NE(m.find("MiB"), std::string::npos) << m;
  }
}

TEST(CudaGemmTuning, SecondStartReadsTheCacheAndACorruptOneIsTunedAgain) {
  GS_REQUIRE_GPU();
  const fs::path dir = fs::temp_directory_path() / fmt::format("gs_gemm_cache_{}", ::getpid());
  fs::remove_all(dir);
  RunnerConfig c = stories_config();
  c.kv_cache_memory_bytes = size_t(16) << 20;
  c.compilation.cudagraph_capture_sizes = {1, 8, 16, 32};
  c.compilation.compile_sizes = {8, 16, 32};  // tuning is opt-in
  c.compilation.cache_dir = dir.string();
  auto start = [&c] {
    ModelRunner r(c);
    return r.stats();
  };
  const RunnerStats cold = start();
  EXPECT_FALSE(cold.gemm_tuning_cache_hit);
  EXPECT_GT(cold.gemm_tuning_seconds, 0.0);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "gemm_tuning")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);

  EXPECT_TRUE(start().gemm_tuning_cache_hit);

  std::ofstream(files[0]) << "{\"format\": 1, \"key\": ";  // truncated: ignored with a warning
  EXPECT_FALSE(start().gemm_tuning_cache_hit);
  EXPECT_TRUE(start().gemm_tuning_cache_hit);  // rewritten by the previous start

  c.compilation.disable_compile_cache = true;
  EXPECT_FALSE(start().gemm_tuning_cache_hit);
  fs::remove_all(dir);
}

// lt_algo_numerics reads every field of the tuner's same-order filter: the algorithm id an
// algorithm was made from, and its split-K count, so a copy with another count differs. (With a
// buffer of the wrong size every field read as 0, and every candidate passed the filter.)
TEST(CudaGemmTuning, AlgorithmNumericsReadTheKernelAndTheSplit) {
  GS_REQUIRE_GPU();
  cublasLtHandle_t h = nullptr;
  ASSERT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  const auto types = std::tuple{CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF};
  int ids[8] = {}, n = 0;
  ASSERT_EQ(std::apply([&](auto... t) { return cublasLtMatmulAlgoGetIds(h, t..., 8, ids, &n); }, types),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(n, 0);
  cublasLtMatmulAlgo_t one{};
  ASSERT_EQ(std::apply([&](auto... t) { return cublasLtMatmulAlgoInit(h, t..., ids[0], &one); }, types),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t four = one;
  const int32_t split1 = 1, split4 = 4;
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&one, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split1, sizeof split1),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&four, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split4, sizeof split4),
            CUBLAS_STATUS_SUCCESS);
  const auto a = lt_algo_numerics(one), b = lt_algo_numerics(four);
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)[0], uint64_t(ids[0]));
  EXPECT_EQ((*a)[1], 1u);
  EXPECT_EQ((*b)[1], 4u);
  EXPECT_NE(*a, *b);
  cublasLtDestroy(h);
}

}  // namespace
}  // namespace gs
