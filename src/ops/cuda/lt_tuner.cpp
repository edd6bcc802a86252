// Implements ops/cuda/lt_tuner.h.
#include "ops/cuda/lt_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cuda/cuda_check.h"
#include "core/logging.h"

namespace gs {

namespace {

constexpr int kCandidates = 16;    // heuristic candidates asked for per shape
constexpr int kWarmRuns = 2;       // untimed runs per candidate
constexpr int kTimedRuns = 16;     // timed runs per candidate (one event pair around them), a layer each
constexpr float kMinGain = 0.02f;  // a candidate must beat the plan's algorithm by 2% to replace it

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

// Whether the library accepts `algo` for a plan (cublasLtMatmulAlgoCheck).
bool algo_valid(const LtTuning& t, const LtPlanRef& p, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t r{};
  return cublasLtMatmulAlgoCheck(t.handle, p.op, p.a, p.b, p.c, p.c, &algo, &r) == CUBLAS_STATUS_SUCCESS &&
         r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= t.workspace_bytes;
}

// Whether it accepts `algo` for the tunable's plan and every plan padded to it.
bool valid_everywhere(const LtTuning& t, const LtTunable& g, const cublasLtMatmulAlgo_t& algo) {
  return algo_valid(t, g.plan, algo) &&
         std::all_of(g.padded.begin(), g.padded.end(), [&](const LtPlanRef& p) { return algo_valid(t, p, algo); });
}

// `algo` for the tunable's plan and every plan padded to it that the library accepts it for (a
// winner other than the plan's own algorithm is accepted by all).
void apply(const LtTuning& t, const LtTunable& g, const cublasLtMatmulAlgo_t& algo) {
  *g.plan.algo = algo;
  for (const LtPlanRef& p : g.padded)
    if (algo_valid(t, p, algo)) *p.algo = algo;
}

// The plan's algorithm first, then the heuristic's other candidates (at most `n` asked for) that
// the library accepts at every padded token count.
std::vector<cublasLtMatmulAlgo_t> candidates(const LtTuning& t, const LtTunable& g, int n) {
  const LtPlanRef& p = g.plan;
  std::vector<cublasLtMatmulAlgo_t> out{*p.algo};
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return out;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &t.workspace_bytes,
                                       sizeof t.workspace_bytes);
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(n));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(t.handle, p.op, p.a, p.b, p.c, p.c, pref, n, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t& a = res[size_t(i)].algo;
    if (res[size_t(i)].state == CUBLAS_STATUS_SUCCESS && std::memcmp(a.data, p.algo->data, sizeof a.data) != 0 &&
        valid_everywhere(t, g, a))
      out.push_back(a);
  }
  return out;
}

// Mean microseconds of one run of `algo` (or a negative number when the library refuses it).
float time_algo(const LtTunable& g, const cublasLtMatmulAlgo_t& algo, cudaStream_t s) {
  size_t next = 0;
  for (int i = 0; i < kWarmRuns; ++i)
    if (g.run(algo, next++) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  EventPair ev;
  GS_CUDA_CHECK(cudaEventRecord(ev.start, s));
  for (int i = 0; i < kTimedRuns; ++i)
    if (g.run(algo, next++) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  GS_CUDA_CHECK(cudaEventRecord(ev.stop, s));
  GS_CUDA_CHECK(cudaEventSynchronize(ev.stop));
  float ms = 0.0f;
  GS_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
  return ms * 1000.0f / kTimedRuns;
}

// The cache key text (ops/gemm_tuning.h) of tuning `t`'s GEMMs.
std::string tuning_key(const LtTuning& t) {
  int dev = 0, driver = 0, runtime = 0;
  GS_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  GS_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  GS_CUDA_CHECK(cudaDriverGetVersion(&driver));
  GS_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::string key =
      fmt::format("tuner=4;gpu={} sm_{}{};driver={};cuda={};cublaslt={};dtype={};workspace={};gemms=", prop.name,
                  prop.major, prop.minor, driver, runtime, cublasLtGetVersion(), t.dtype, t.workspace_bytes);
  for (const LtTunable& g : t.gemms) {
    const GemmShape& s = g.shape;
    key += fmt::format("{}x{}x{}{}{}/{},", s.m, s.n, s.k, s.in_f32 ? "f" : "b", s.y_f32 ? "f" : "b", g.padded.size());
  }
  return key;
}

}  // namespace

void LtSeen::record(const void* x_, Weight w, void* y_, int M, const void* x_scales_) {
  if (M > max_m) *this = {x_, x_scales_, y_, {w}, M};
  if (M == max_m && ws.size() < kMaxWeights && std::find(ws.begin(), ws.end(), w) == ws.end()) ws.push_back(w);
}

LtTunable lt_tunable(const GemmShape& shape, const GemmTuningOptions& opts, const std::function<bool(int M)>& runs,
                     const std::function<LtPlanRef(int M)>& plan) {
  LtTunable g{shape, plan(shape.m), {}, {}};
  if (const auto it = opts.padded_from.find(shape.m); it != opts.padded_from.end())
    for (const int m : it->second)
      if (runs(m)) g.padded.push_back(plan(m));
  return g;
}

GemmTuningReport lt_tune(LtTuning t, const GemmTuningOptions& opts, cudaStream_t s) {
  const auto t0 = std::chrono::steady_clock::now();
  GemmTuningReport report;
  if (t.gemms.empty()) return report;
  std::sort(t.gemms.begin(), t.gemms.end(),
            [](const LtTunable& a, const LtTunable& b) { return a.shape < b.shape; });  // a stable key
  const std::string key = tuning_key(t);
  const std::string dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
  const bool cached = opts.use_cache && !dir.empty();
  if (cached) report.cache_file = gemm_tuning_file(dir, key);
  GemmTuningTable table;
  if (cached)
    if (auto tab = load_gemm_tuning(report.cache_file, key)) table = std::move(*tab);
  GS_CUDA_CHECK(cudaStreamSynchronize(s));
  GemmTuningTable out;
  for (const LtTunable& g : t.gemms) {
    if (auto it = table.find(g.shape); it != table.end()) {
      const cublasLtMatmulAlgo_t a = from_record(it->second);
      if (algo_valid(t, g.plan, a)) {
        apply(t, g, a);
        out[g.shape] = it->second;
        ++report.from_cache;
        continue;
      }
      spdlog::warn("GEMM tuning cache {}: the algorithm of M={} N={} K={} is refused by cuBLASLt; tuning it again",
                   report.cache_file, g.shape.m, g.shape.n, g.shape.k);
    }
    const std::vector<cublasLtMatmulAlgo_t> cands = candidates(t, g, kCandidates);
    float first = -1.0f, best = -1.0f;
    size_t best_i = 0;
    for (size_t i = 0; i < cands.size(); ++i) {
      const float us = time_algo(g, cands[i], s);
      if (i == 0) first = us;
      if (us > 0 && (best < 0 || us < best)) best = us, best_i = i;
    }
    if (best < 0) continue;  // keep the plan's algorithm
    if (first > 0 && best > first * (1.0f - kMinGain)) best = first, best_i = 0;
    apply(t, g, cands[best_i]);
    out[g.shape] = to_record(cands[best_i], best);
    ++report.tuned;
    report.changed += best_i != 0;
  }
  if (cached && report.tuned > 0) save_gemm_tuning(report.cache_file, key, out);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

GemmTuningReport merge(GemmTuningReport a, const GemmTuningReport& b) {
  a.tuned += b.tuned;
  a.from_cache += b.from_cache;
  a.changed += b.changed;
  a.seconds += b.seconds;
  if (a.cache_file.empty())
    a.cache_file = b.cache_file;
  else if (!b.cache_file.empty())
    a.cache_file += ", " + b.cache_file;
  return a;
}

}  // namespace gs
