// Implements ops/cuda/fp8_lt_gemm.h. Row-major y = x w^T is column-major y^T = w x^T: A is w
// (K x N, transposed), B is x (K x M), D is y^T (N x M): the "TN" layout FP8 GEMMs require.
#include "ops/cuda/fp8_lt_gemm.h"

#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "ops/cuda/fp8_kernels.h"

namespace gs {

namespace {
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

void destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (op) cublasLtMatmulDescDestroy(op);
}
}  // namespace

Fp8LtGemm::Fp8LtGemm(Allocator& alloc) : workspace_(Tensor::empty({int64_t(kWorkspaceBytes)}, DType::U8, alloc)) {
  GS_CHECK(cublasLtCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "cuBLASLt: cannot create a handle for FP8 GEMMs");
}

Fp8LtGemm::~Fp8LtGemm() {
  for (auto& [key, p] : plans_) destroy(p.op, p.a, p.b, p.c);
  if (handle_) cublasLtDestroy(handle_);
}

Fp8LtGemm::Plan& Fp8LtGemm::plan(int M, int N, int K) {
  auto [it, fresh] = plans_.try_emplace({M, N, K});
  Plan& p = it->second;
  if (!fresh) return p;
  // No scale attributes: the library's default, unit per-tensor scales.
  bool ok = cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
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
  return p;
}

bool Fp8LtGemm::supported(int M, int N, int K) { return M > 0 && N > 0 && K > 0 && K % 16 == 0 && plan(M, N, K).ok; }

void Fp8LtGemm::matmul(const uint8_t* xq, const float* x_scale, const uint8_t* wq, const float* w_scale,
                       const uint16_t* bias, uint16_t* y, int M, int N, int K, cudaStream_t s) {
  Plan& p = plan(M, N, K);
  GS_CHECK(p.ok, "cuBLASLt FP8 GEMM: no algorithm for M {} N {} K {}", M, N, K);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(handle_, p.op, &alpha, wq, p.a, xq, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                           workspace_.data(), kWorkspaceBytes, s);
  GS_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt FP8 GEMM (M {} N {} K {}) failed: status {}", M, N, K, int(st));
  GS_CUDA_CHECK(cuda::fp8_scale_output(y, x_scale, w_scale, bias, M, N, s));
}

}  // namespace gs
