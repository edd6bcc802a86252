// LtGemm::tune and its helpers: cuBLASLt candidates timed at start-up, winners kept in the
// on-disk cache of ops/gemm_tuning.h (docs/CUDA_GRAPHS.md §9).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>

#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/logging.h"
#include "ops/cuda/lt_gemm.h"

namespace gs {

namespace {

constexpr int kCandidates =
    16;                         // heuristic candidates asked for per shape (those of its first choice's numerics timed)
constexpr int kWarmRuns = 2;    // untimed runs per candidate
constexpr int kTimedRuns = 16;  // timed runs per candidate (one event pair around them), a layer each
constexpr float kMinGain = 0.02f;  // a candidate must beat the heuristic's first choice by 2% to replace it

// RAII pair of CUDA events.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    GS_CUDA_CHECK(cudaEventCreate(&start));
    GS_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

GemmAlgoRecord to_record(const cublasLtMatmulAlgo_t& a, float us) {
  GemmAlgoRecord r;
  static_assert(sizeof(a.data) == sizeof(r.algo), "cublasLtMatmulAlgo_t is 8 x uint64");
  std::memcpy(r.algo.data(), a.data, sizeof(a.data));
  r.us = us;
  return r;
}

cublasLtMatmulAlgo_t from_record(const GemmAlgoRecord& r) {
  cublasLtMatmulAlgo_t a{};
  std::memcpy(a.data, r.algo.data(), sizeof(a.data));
  return a;
}

}  // namespace

std::optional<std::array<uint64_t, 5>> lt_algo_numerics(const cublasLtMatmulAlgo_t& a) {
  const cublasLtMatmulAlgoConfigAttributes_t attrs[] = {
      CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
      CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID};
  std::array<uint64_t, 5> out{};
  for (size_t i = 0; i < out.size(); ++i) {
    // The library refuses a buffer of any size but the attribute's own (16 or 32 bits): ask it
    // first, then read that many bytes into the low end of the zeroed word.
    size_t size = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&a, attrs[i], nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS || size == 0 ||
        size > sizeof out[i] ||
        cublasLtMatmulAlgoConfigGetAttribute(&a, attrs[i], &out[i], size, &size) != CUBLAS_STATUS_SUCCESS)
      return std::nullopt;
  }
  return out;
}

std::vector<cublasLtMatmulAlgo_t> LtGemm::candidates(const Plan& p, int n) const {
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return {};
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(n));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, n, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> out;
  if (st != CUBLAS_STATUS_SUCCESS) return out;
  // The first choice, and those that sum each output in its order (unknown order: left out).
  std::optional<std::array<uint64_t, 5>> first;
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t& a = res[size_t(i)].algo;
    if (res[size_t(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    if (out.empty()) {
      first = lt_algo_numerics(a);
      out.push_back(a);
    } else if (first && lt_algo_numerics(a) == first) {
      out.push_back(a);
    }
  }
  return out;
}

float LtGemm::time_algo(const Plan& p, const cublasLtMatmulAlgo_t& algo, const Seen& buf, cudaStream_t s) {
  const float alpha = 1.0f, beta = 0.0f;
  size_t next = 0;  // cycles through the layers' weights (Seen)
  auto run = [&] {
    const void* w = buf.ws[next++ % buf.ws.size()];
    return cublasLtMatmul(handle_, p.op, &alpha, w, p.a, buf.x, p.b, &beta, buf.y, p.c, buf.y, p.c, &algo,
                          workspace_.data(), kWorkspaceBytes, s);
  };
  for (int i = 0; i < kWarmRuns; ++i)
    if (run() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  EventPair ev;
  GS_CUDA_CHECK(cudaEventRecord(ev.start, s));
  for (int i = 0; i < kTimedRuns; ++i)
    if (run() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  GS_CUDA_CHECK(cudaEventRecord(ev.stop, s));
  GS_CUDA_CHECK(cudaEventSynchronize(ev.stop));
  float ms = 0.0f;
  GS_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
  return ms * 1000.0f / kTimedRuns;
}

bool LtGemm::algo_valid(const Plan& p, const cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulHeuristicResult_t r{};
  return cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &algo, &r) == CUBLAS_STATUS_SUCCESS &&
         r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= kWorkspaceBytes;
}

std::string LtGemm::tuning_key(const std::string& dtype, const std::vector<GemmShape>& shapes) const {
  int dev = 0, driver = 0, runtime = 0;
  GS_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  GS_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  GS_CUDA_CHECK(cudaDriverGetVersion(&driver));
  GS_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::string key =
      fmt::format("tuner=3;gpu={} sm_{}{};driver={};cuda={};cublaslt={};dtype={};workspace={};gemms=", prop.name,
                  prop.major, prop.minor, driver, runtime, cublasLtGetVersion(), dtype, kWorkspaceBytes);
  for (const GemmShape& g : shapes)
    key += fmt::format("{}x{}x{}{}{},", g.m, g.n, g.k, g.in_f32 ? "f" : "b", g.y_f32 ? "f" : "b");
  return key;
}

GemmTuningReport LtGemm::tune(const GemmTuningOptions& opts, const std::string& dtype, const RunsElsewhere& elsewhere,
                              cudaStream_t s) {
  const auto t0 = std::chrono::steady_clock::now();
  GemmTuningReport report;
  std::vector<GemmShape> shapes;  // every (M, N, K) to tune, in a stable order
  const std::set<int> sizes(opts.sizes.begin(), opts.sizes.end());
  for (const auto& [nk, seen] : seen_)
    for (int m : sizes) {
      const auto [n, k, in_f32, y_f32] = nk;
      if (m <= seen.max_m && !(elsewhere && elsewhere(m, n, k, seen.x, seen.ws.front())))
        shapes.push_back({m, n, k, in_f32, y_f32});
    }
  if (shapes.empty()) return report;
  const std::string key = tuning_key(dtype, shapes);
  const std::string dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
  const bool cached = opts.use_cache && !dir.empty();
  if (cached) report.cache_file = gemm_tuning_file(dir, key);
  GemmTuningTable table;
  if (cached)
    if (auto t = load_gemm_tuning(report.cache_file, key)) table = std::move(*t);
  GS_CUDA_CHECK(cudaStreamSynchronize(s));
  GemmTuningTable out;
  for (const GemmShape& g : shapes) {
    Plan& p = plan(g.m, g.n, g.k, g.in_f32, g.y_f32);
    const Seen& buf = seen_.at({g.n, g.k, g.in_f32, g.y_f32});
    if (auto it = table.find(g); it != table.end()) {
      const cublasLtMatmulAlgo_t a = from_record(it->second);
      if (algo_valid(p, a)) {
        p.algo = a;
        out[g] = it->second;
        ++report.from_cache;
        continue;
      }
      spdlog::warn("GEMM tuning cache {}: the algorithm of M={} N={} K={} is refused by cuBLASLt; tuning it again",
                   report.cache_file, g.m, g.n, g.k);
    }
    const std::vector<cublasLtMatmulAlgo_t> cands = candidates(p, kCandidates);
    if (cands.empty()) continue;  // keep plan()'s choice
    float first = -1.0f, best = -1.0f;
    size_t best_i = 0;
    for (size_t i = 0; i < cands.size(); ++i) {
      const float us = time_algo(p, cands[i], buf, s);
      if (i == 0) first = us;
      if (us > 0 && (best < 0 || us < best)) best = us, best_i = i;
    }
    if (best < 0) continue;
    if (first > 0 && best > first * (1.0f - kMinGain)) best = first, best_i = 0;
    p.algo = cands[best_i];
    out[g] = to_record(cands[best_i], best);
    ++report.tuned;
    report.changed += best_i != 0;
  }
  if (cached && report.tuned > 0) save_gemm_tuning(report.cache_file, key, out);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace gs
