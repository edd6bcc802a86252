// Implements ops/cuda/fp8_lt_gemm.h. Row-major y = x w^T is column-major y^T = w x^T: A is w
// (K x N, transposed), B is x (K x M), D is y^T (N x M): the "TN" layout FP8 GEMMs require.
#include "ops/cuda/fp8_lt_gemm.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/error.h"

namespace gs {

namespace {
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
// The block-scaled GEMM splits K up to this many tokens: from 128 the split's f32 reduction costs
// more than the idle SMs (docs/PERF.md, "FP8 weights").
constexpr int kBlockSplitMaxM = 64;

void destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (op) cublasLtMatmulDescDestroy(op);
}
}  // namespace

Fp8LtGemm::Fp8LtGemm(Allocator& alloc, bool block_split_k, bool fast_accum)
    : block_split_k_(block_split_k),
      fast_accum_(fast_accum),
      workspace_(Tensor::empty({int64_t(kWorkspaceBytes)}, DType::U8, alloc)) {
  GS_CHECK(cublasLtCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "cuBLASLt: cannot create a handle for FP8 GEMMs");
}

Fp8LtGemm::~Fp8LtGemm() {
  for (auto& [key, p] : plans_) destroy(p.op, p.a, p.b, p.c);
  if (handle_) cublasLtDestroy(handle_);
}

Fp8LtGemm::Plan& Fp8LtGemm::plan(int M, int N, int K, bool block) {
  auto [it, fresh] = plans_.try_emplace({M, N, K, block});
  Plan& p = it->second;
  if (!fresh) return p;
  // Unscaled: no scale attributes (the library's default, unit per-tensor scales).
  bool ok = cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  if (block) {
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                  b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode) == 0;
    // The heuristic finds no algorithm while the scale pointers are unset: placeholders (device
    // memory, aligned) until matmul() sets each call's own.
    const void* placeholder = workspace_.data();
    ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                              sizeof placeholder) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                              sizeof placeholder) == 0;
  } else if (fast_accum_) {
    const int8_t fast = 1;
    ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) == 0;
  }
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, M, K) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, N, M, N) == 0;
  cublasLtMatmulPreference_t pref = nullptr;
  ok = ok && cublasLtMatmulPreferenceCreate(&pref) == 0;
  const size_t ws = kWorkspaceBytes;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == 0;
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  ok = ok && cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found) == 0 && found > 0;
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ok) p.algo = res.algo;
  p.ok = ok;
  if (ok && block && block_split_k_) split_k(p, M, N, K);
  return p;
}

void Fp8LtGemm::split_k(Plan& p, int M, int N, int K) {
  if (M > kBlockSplitMaxM) return;
  int32_t split = 1, supported = 0;
  size_t n = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split, &n) != 0 ||
      split > 1 ||
      cublasLtMatmulAlgoCapGetAttribute(&p.algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &supported, sizeof supported, &n) !=
          0 ||
      !supported)
    return;
  const int tiles = (N + 127) / 128 * ((M + 127) / 128);
  const int32_t want = std::min(cuda_current_sm_count(132) / tiles, K / (4 * 128));
  if (want < 2) return;
  cublasLtMatmulAlgo_t algo = p.algo;
  const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &want, sizeof want) == 0 &&
      cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) == 0 &&
      cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
      check.workspaceSize <= kWorkspaceBytes)
    p.algo = algo;
}

bool Fp8LtGemm::supported(int M, int N, int K, bool block) {
  return M > 0 && N > 0 && K > 0 && K % (block ? 128 : 16) == 0 && plan(M, N, K, block).ok;
}

void Fp8LtGemm::matmul(const uint8_t* xq, const uint8_t* wq, uint16_t* y, int M, int N, int K, cudaStream_t s,
                       const float* w_grid, const float* x_groups) {
  const bool block = w_grid != nullptr;
  Plan& p = plan(M, N, K, block);
  GS_CHECK(p.ok, "cuBLASLt FP8 GEMM: no algorithm for M {} N {} K {}{}", M, N, K, block ? " (128x128 blocks)" : "");
  seen_[{N, K, block}].record(xq, {wq, w_grid}, y, M, x_groups);
  const cublasStatus_t st = run(p, p.algo, xq, wq, y, s, w_grid, x_groups);
  GS_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt FP8 GEMM (M {} N {} K {}) failed: status {}", M, N, K, int(st));
}

cublasStatus_t Fp8LtGemm::run(Plan& p, const cublasLtMatmulAlgo_t& algo, const void* xq, const void* wq, void* y,
                              cudaStream_t s, const void* w_grid, const void* x_groups) {
  if (w_grid) {  // the scale pointers of this call (plans are cached per shape)
    cublasStatus_t st =
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_grid, sizeof w_grid);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_groups, sizeof x_groups);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, p.op, &alpha, wq, p.a, xq, p.b, &beta, y, p.c, y, p.c, &algo, workspace_.data(),
                        kWorkspaceBytes, s);
}

GemmTuningReport Fp8LtGemm::tune(const GemmTuningOptions& opts, const RunsHere& here, cudaStream_t s) {
  // Unscaled and block-scaled plans of one shape are other GEMMs: each its own cache key.
  std::array<LtTuning, 2> t{LtTuning{handle_, kWorkspaceBytes, fast_accum_ ? "e4m3-fast-accum" : "e4m3", {}},
                            LtTuning{handle_, kWorkspaceBytes, "e4m3-blocks-128x128", {}}};
  const std::set<int> sizes(opts.sizes.begin(), opts.sizes.end());
  for (const auto& [nkb, seen] : seen_)
    for (const int m : sizes) {
      const auto [n, k, block] = nkb;
      const auto runs = [&](int M) { return (!here || here(M, n, k, block)) && plan(M, n, k, block).ok; };
      if (m > seen.max_m || !runs(m)) continue;
      LtTunable g = lt_tunable({m, n, k, false, false}, opts, runs, [&](int M) {
        Plan& p = plan(M, n, k, block);
        return LtPlanRef{p.op, p.a, p.b, p.c, &p.algo};
      });
      g.run = [this, &p = plan(m, n, k, block), &seen, s](const cublasLtMatmulAlgo_t& algo, size_t i) {
        const LtSeen::Weight& w = seen.ws[i % seen.ws.size()];
        return run(p, algo, seen.x, w.w, seen.y, s, w.scales, seen.x_scales);
      };
      t[block].gemms.push_back(std::move(g));
    }
  return merge(lt_tune(std::move(t[0]), opts, s), lt_tune(std::move(t[1]), opts, s));
}

}  // namespace gs
