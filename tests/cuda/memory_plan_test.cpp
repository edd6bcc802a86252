// The memory plan with graphs (docs/CUDA_GRAPHS.md §8) and the GEMM tuning cache (§9) on the GPU:
// graph memory is reserved before the KV cache takes the rest, so even --gpu-memory-utilization
// 1.0 captures every graph; an impossible value is an error naming the flag; a second start reads
// the tuning cache, and a corrupt cache is tuned again and rewritten; a batch padded to a tuned size
// runs its winner.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
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

// A batch the graphs pad to a tuned size (60 to 64) runs that size's winner: its rows equal the
// padded GEMM's bit for bit, whatever order the winner sums in (a bf16 o_proj of llama3.1-8b).
TEST(CudaGemmTuning, APaddedBatchRunsItsSizesWinnerBitForBit) {
  GS_REQUIRE_GPU();
  auto be = make_cuda_backend(0, DType::BF16);
  const cudaStream_t s = dynamic_cast<CudaStream&>(be->stream()).handle();
  const int M = 64, m = 60, N = 4096, K = 4096;
  const Tensor x = test::on(*be, test::randn(size_t(M) * K, 1), {M, K}, DType::BF16);
  const Tensor ws[] = {test::on(*be, test::randn(size_t(N) * K, 2, 0.02f), {N, K}, DType::BF16),
                       test::on(*be, test::randn(size_t(N) * K, 3, 0.02f), {N, K}, DType::BF16)};
  const Tensor y = Tensor::empty({M, N}, DType::BF16, be->allocator());
  LtGemm lt(be->allocator());
  auto rows = [&](const Tensor& w, int rows_m, int keep) {
    lt.matmul(x.data(), w.data(), y.data(), false, false, rows_m, N, K, s);
    std::vector<float> out = test::read(*be, y.prefix({rows_m, N}));
    out.resize(size_t(keep) * N);
    return out;
  };
  for (const Tensor& w : ws) rows(w, M, M);  // the warm-up records the shape
  GemmTuningOptions opts;
  opts.sizes = {M};
  opts.use_cache = false;
  opts.padded_from[M] = {m};
  const GemmTuningReport r = lt.tune(opts, "bf16", nullptr, s);
  EXPECT_EQ(r.tuned, 1);
  for (const Tensor& w : ws) EXPECT_EQ(rows(w, m, m), rows(w, M, m)) << r.changed << " winner(s) replaced the first";
}

}  // namespace
}  // namespace gs
