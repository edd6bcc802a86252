// The cuBLASLt heuristic's candidates for graphserve's unscaled FP8 GEMM (ops/cuda/fp8_lt_gemm: e4m3 x e4m3,
// bf16 out, fast accumulation, 32 MiB workspace) on the llama3.1-8b shapes at 64 and 128 tokens, each timed over 100
// runs cycling through 1 GiB of weights (so they stream from HBM, not L2), with the configuration fields that tell
// them apart. Build here: nvcc -O2 -arch=sm_90a -o lt_fp8_candidates tools/gpu/lt_fp8_candidates.cu -lcublasLt;
// run on the device with LD_LIBRARY_PATH=/usr/local/cuda/lib64.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#define CK(x) do { auto e = (x); if (e != 0) { printf("fail %s:%d %d\n", __FILE__, __LINE__, int(e)); } } while (0)
int main() {
  cublasLtHandle_t h; CK(cublasLtCreate(&h));
  const size_t ws_bytes = 32 << 20; void* ws; CK(cudaMalloc(&ws, ws_bytes));
  struct S { int N, K; } shapes[] = {{28672, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}};
  const int Ms[] = {64, 128};
  const size_t pool = size_t(1) << 30;  // 1 GiB of weights, rotated
  uint8_t* wbuf; CK(cudaMalloc(&wbuf, pool)); CK(cudaMemset(wbuf, 0x38, pool));
  uint8_t* x; CK(cudaMalloc(&x, 128 * 14336)); CK(cudaMemset(x, 0x38, 128 * 14336));
  uint16_t* y; CK(cudaMalloc(&y, 128 * 28672 * 2));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (auto sh : shapes) for (int M : Ms) {
    const int N = sh.N, K = sh.K;
    cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int8_t fast = 1; CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res[64]; int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 64, res, &found));
    const size_t wbytes = size_t(N) * K; const int copies = int(pool / wbytes);
    const float alpha = 1, beta = 0;
    printf("== N %d K %d M %d: %d candidates (weights %.1f MB, %d copies)\n", N, K, M, found, wbytes / 1e6, copies);
    for (int i = 0; i < found; ++i) {
      int tile = 0, stages = 0, splitk = 0, cluster = 0, swz = 0, red = 0; size_t n;
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &n);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &n);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &n);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &n);
      cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &n);
      int algo_id = 0; cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof algo_id, &n);
      auto run = [&](int r) {
        return cublasLtMatmul(h, op, &alpha, wbuf + size_t(r % copies) * wbytes, la, x, lb, &beta, y, lc, y, lc,
                              &res[i].algo, ws, ws_bytes, s);
      };
      if (run(0) != 0) { printf("  #%2d refused\n", i); continue; }
      for (int r = 0; r < 10; ++r) run(r);
      cudaEventRecord(a, s);
      const int reps = 100;
      for (int r = 0; r < reps; ++r) run(r);
      cudaEventRecord(b, s); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b);
      const float us = ms * 1000 / reps;
      printf("  #%2d algo %3d tile %3d stages %3d splitK %2d red %d cluster %2d swz %d ws %7zu: %7.2f us (%.2f TB/s)\n", i,
             algo_id, tile, stages, splitk, red, cluster, swz, res[i].workspaceSize, us, wbytes / us / 1e6);
    }
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc); cublasLtMatmulDescDestroy(op);
  }
  return 0;
}
