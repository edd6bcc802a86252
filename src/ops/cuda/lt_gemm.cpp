// Implements ops/cuda/lt_gemm.h (LtGemm).
#include "ops/cuda/lt_gemm.h"

#include <set>

#include "core/error.h"

namespace gs {

namespace {
void lt_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt {} failed: status {}", what, int(st));
}
}  // namespace

LtGemm::LtGemm(Allocator& alloc) {
  lt_check(cublasLtCreate(&handle_), "create");
  workspace_ = Tensor::empty({int64_t(kWorkspaceBytes)}, DType::U8, alloc);
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cublasLtDestroy(handle_);
}

// Row-major y[M, N] = x[M, K] w[N, K]^T is column-major y^T[N, M] = (w_cm[K, N])^T x_cm[K, M].
LtGemm::Plan& LtGemm::plan(int M, int N, int K, bool in_f32, bool y_f32, const Batch& batch) {
  const Key key{M, N, K, in_f32, y_f32, batch.key()};
  const cudaDataType_t in = in_f32 ? CUDA_R_32F : CUDA_R_16BF;
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  lt_check(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  // Column-major terms: y^T (N x M) = op(w) x^T, op(w) = w^T of w's [N, K] rows, or w_kn's [K, N]
  // rows as they are.
  const cublasOperation_t ta = batch.w_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (batch.w_kn)
    lt_check(cublasLtMatrixLayoutCreate(&p.a, in, N, K, N), "layout a");
  else
    lt_check(cublasLtMatrixLayoutCreate(&p.a, in, K, N, K), "layout a");
  lt_check(cublasLtMatrixLayoutCreate(&p.b, in, K, M, batch.ldx > 0 ? batch.ldx : K), "layout b");
  lt_check(cublasLtMatrixLayoutCreate(&p.c, y_f32 ? CUDA_R_32F : in, N, M, batch.ldy > 0 ? batch.ldy : N), "layout c");
  if (batch.count > 1) {
    const auto batched = [&](cublasLtMatrixLayout_t l, int64_t stride) {
      lt_check(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch.count, sizeof batch.count),
          "batch count");
      lt_check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
               "batch stride");
    };
    batched(p.a, batch.w_stride);
    batched(p.b, batch.x_stride);
    batched(p.c, batch.y_stride);
  }

  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
    fail("cuBLASLt found no algorithm for a {} matmul of M={} N={} K={} (status {})", in_f32 ? "f32" : "bf16", M, N, K,
         int(st));
  }
  p.algo = res.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::matmul(const void* x, const void* w, void* y, bool in_f32, bool y_f32, int M, int N, int K,
                    cudaStream_t s) {
  if (M == 0 || N == 0) return;
  seen_[{N, K, in_f32, y_f32}].record(x, {w}, y, M);
  run(plan(M, N, K, in_f32, y_f32), x, w, y, s);
}

void LtGemm::matmul_batched(const void* x, const void* w, void* y, bool in_f32, bool y_f32, int M, int N, int K,
                            const Batch& batch, cudaStream_t s) {
  if (M == 0 || N == 0 || batch.count == 0) return;
  run(plan(M, N, K, in_f32, y_f32, batch), x, w, y, s);
}

void LtGemm::run(const Plan& p, const void* x, const void* w, void* y, cudaStream_t s) {
  const float alpha = 1.0f, beta = 0.0f;
  lt_check(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo, workspace_.data(),
                          kWorkspaceBytes, s),
           "matmul");
}

GemmTuningReport LtGemm::tune(const GemmTuningOptions& opts, const std::string& dtype, const RunsElsewhere& elsewhere,
                              cudaStream_t s) {
  LtTuning t{handle_, kWorkspaceBytes, dtype, {}};
  const std::set<int> sizes(opts.sizes.begin(), opts.sizes.end());
  for (const auto& [nk, seen] : seen_)
    for (const int m : sizes) {
      const auto [n, k, in_f32, y_f32] = nk;
      const auto here = [&](int M) { return !elsewhere || !elsewhere(M, n, k, seen.x, seen.ws.front().w); };
      if (m > seen.max_m || !here(m)) continue;
      LtTunable g = lt_tunable({m, n, k, in_f32, y_f32}, opts, here, [&](int M) {
        Plan& p = plan(M, n, k, in_f32, y_f32);
        return LtPlanRef{p.op, p.a, p.b, p.c, &p.algo};
      });
      g.run = [this, p = g.plan, &seen, s](const cublasLtMatmulAlgo_t& algo, size_t i) {
        const float alpha = 1.0f, beta = 0.0f;
        return cublasLtMatmul(handle_, p.op, &alpha, seen.ws[i % seen.ws.size()].w, p.a, seen.x, p.b, &beta, seen.y,
                              p.c, seen.y, p.c, &algo, workspace_.data(), kWorkspaceBytes, s);
      };
      t.gemms.push_back(std::move(g));
    }
  return lt_tune(std::move(t), opts, s);
}

}  // namespace gs
