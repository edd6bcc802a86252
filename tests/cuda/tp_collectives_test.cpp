// The tensor-parallel communicator's custom collectives on two GPUs, one process per rank (this
// test binary re-executed with the rank in its environment, as the workers run):
// - the fused all-reduce + residual add + RMSNorm (the flagless kernel, then with
//   AllReduceKernelOptions::lamport off the one with the barrier) against the one-shot
//   all-reduce then the backend's add_rms_norm, after every earlier size's timed graph replays
//   (so the flagless kernel's buffers have been reused and refilled across sizes);
// - the column gather of vocab-parallel logits, eager and replayed in a graph, against every
//   rank's block at its columns;
// - the one-token projection that sums its ranks' partials itself (AddRmsNorm::peer_sum), eager
//   and replayed in a graph, against the GEMV then the fused kernel.
// Skips with fewer than two GPUs.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/cuda/bench_tensors.h"
#include "cuda_test_util.h"
#include "distributed/cuda/all_reduce_bench.h"
#include "distributed/cuda/nccl_communicator.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

// Waits up to timeout_s for `pid`; its exit status, or -1 when it had to be killed.
int wait_for(pid_t pid, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `test` as ranks 0 and 1 of a fresh group: this binary re-executed with the test as its
// filter, GS_TP_TEST_RANK / GS_TP_TEST_GROUP and `option` in GS_TP_TEST_OPTION (the tests' own
// variables), one GPU visible to each; both must exit 0.
void run_two_ranks(const char* test, const char* option) {
  const std::string exe = std::string("/proc/") + std::to_string(getpid()) + "/exe";
  std::vector<std::string> gpus{"0", "1"};  // rank r takes the r-th GPU this process sees
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    gpus.clear();
    std::stringstream ss(v);
    for (std::string g; std::getline(ss, g, ',');) gpus.push_back(g);
    ASSERT_GE(gpus.size(), 2u);
  }
  const std::string group = make_nccl_group_id();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("GS_TP_TEST_RANK", std::to_string(r).c_str(), 1);
      setenv("GS_TP_TEST_GROUP", group.c_str(), 1);
      setenv("GS_TP_TEST_OPTION", option, 1);
      setenv("CUDA_VISIBLE_DEVICES", gpus[size_t(r)].c_str(), 1);
      const std::string filter = std::string("--gtest_filter=") + test;
      execl(exe.c_str(), exe.c_str(), filter.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(wait_for(pids[size_t(r)], 180.0), 0) << test << ": rank " << r << ", option " << option << " failed";
}

// The rank this process runs (a re-executed rank), or -1 in the parent.
int tp_test_rank() {
  const char* r = std::getenv("GS_TP_TEST_RANK");
  return r ? std::atoi(r) : -1;
}
const char* tp_test_option() {
  const char* o = std::getenv("GS_TP_TEST_OPTION");
  return o ? o : "";
}

// One rank of the fused test; lamport: the fused kernel's variant.
void fused_rank(int rank, const std::string& group, bool lamport) {
  auto backend = make_cuda_backend(0, DType::BF16);
  AllReduceKernelOptions options;
  options.lamport = lamport;
  auto comm = make_nccl_communicator(group, rank, 2, *backend, /*disable_custom_all_reduce=*/false, options);
  ASSERT_EQ(comm->name(), "custom+nccl") << "the two GPUs cannot map each other's memory";
  // 1, 7, 32 and (at hidden 1024) 64 rows: the fused kernel (blocks with no row, one row, two
  // rows); past kFusedNormMaxBytes the two ops run, and agree trivially.
  const std::vector<int> rows{1, 7, 32, 64, 1100};
  for (int hidden : {4096, 1024}) {
    const auto t = bench_all_reduce_add_rms_norm(*comm, *backend, rows, hidden, 2, 2);
    ASSERT_EQ(t.size(), rows.size());
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t[i].fused_available, size_t(rows[i]) * size_t(hidden) * 2 <= kFusedNormMaxBytes)
          << rows[i] << " x " << hidden;
      EXPECT_EQ(t[i].max_abs_diff, 0.0) << rows[i] << " x " << hidden;
    }
  }
  comm->barrier();
}

TEST(CudaTp, FusedAllReduceAddRmsNormEqualsTheTwoOpsOnTwoGpus) {
  if (const int rank = tp_test_rank(); rank >= 0)
    return fused_rank(rank, std::getenv("GS_TP_TEST_GROUP"), std::strcmp(tp_test_option(), "0") != 0);
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  // Both fused kernels: the flagless (Lamport) one, the default, and the one with the barrier.
  for (const char* lamport : {"1", "0"})
    run_two_ranks("CudaTp.FusedAllReduceAddRmsNormEqualsTheTwoOpsOnTwoGpus", lamport);
}

// Element (row, col) of rank r's logits block in the gather test, exact in f32 and (below 256
// in magnitude) in bf16; `round` tells the graph's replays apart.
float gather_value(int r, int64_t row, int64_t col, int round, DType dt) {
  if (dt == DType::BF16) return float((r * 97 + row * 31 + col * 7 + round * 13) % 255 - 127);
  return float((int64_t(r * 131 + row) * 70001 + col) % 4000000) + 0.25f * float(round);
}

// One rank of the gather test: each shape's columns gathered eagerly and by a captured graph
// replayed over new contents equal, bit for bit, every rank's block at its columns.
void gather_rank(int rank, const std::string& group) {
  auto backend = make_cuda_backend(0, DType::BF16);
  auto comm = make_nccl_communicator(group, rank, 2, *backend, /*disable_custom_all_reduce=*/false, {});
  ASSERT_EQ(comm->name(), "custom+nccl") << "the two GPUs cannot map each other's memory";
  struct Shape3 {
    int64_t rows, cols, width;
    DType dt;
  };
  // llama3.1-8b's logits at bs 1 (one call), 33 rows (three calls of 16), 65 rows (NCCL); a
  // width cut inside rank 1's block with rows off 16-byte alignment; bf16 rows.
  const std::vector<Shape3> shapes{{1, 64128, 128256, DType::F32},
                                   {33, 64128, 128256, DType::F32},
                                   {65, 64128, 128256, DType::F32},
                                   {7, 1000, 1999, DType::F32},
                                   {3, 136, 270, DType::BF16}};
  for (const Shape3& sh : shapes) {
    const std::string what = std::to_string(sh.rows) + " x " + std::to_string(sh.cols) + " of " +
                             std::to_string(sh.width) + " " + std::string(dtype_name(sh.dt));
    const Tensor local = Tensor::empty({sh.rows, sh.cols}, sh.dt, backend->allocator());
    const Tensor scratch = Tensor::empty({2 * sh.rows * sh.cols}, sh.dt, backend->allocator());
    const Tensor out = Tensor::empty({sh.rows, sh.width}, sh.dt, backend->allocator());
    const auto fill = [&](int round) {
      std::vector<float> v(size_t(sh.rows * sh.cols));
      for (int64_t i = 0; i < sh.rows; ++i)
        for (int64_t j = 0; j < sh.cols; ++j) v[size_t(i * sh.cols + j)] = gather_value(rank, i, j, round, sh.dt);
      backend->copy(local, test::on(*backend, v, local.shape(), sh.dt));
    };
    const auto check = [&](int round) {
      const std::vector<float> got = test::read(*backend, out);
      int64_t wrong = 0;
      for (int64_t i = 0; i < sh.rows; ++i)
        for (int64_t j = 0; j < sh.width; ++j)
          wrong += got[size_t(i * sh.width + j)] != gather_value(int(j / sh.cols), i, j % sh.cols, round, sh.dt);
      EXPECT_EQ(wrong, 0) << what << ", round " << round;
    };
    fill(0);
    comm->gather_columns(local, scratch, out);
    check(0);
    backend->stream().begin_capture();
    comm->gather_columns(local, scratch, out);
    const std::unique_ptr<Graph> graph = backend->stream().end_capture();
    for (int round = 1; round <= 3; ++round) {
      fill(round);
      graph->replay();
      check(round);
    }
  }
  comm->barrier();
}

TEST(CudaTp, LogitsGatherPlacesEveryRanksColumnsOnTwoGpus) {
  if (const int rank = tp_test_rank(); rank >= 0) return gather_rank(rank, std::getenv("GS_TP_TEST_GROUP"));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  run_two_ranks("CudaTp.LogitsGatherPlacesEveryRanksColumnsOnTwoGpus", "");
}

// One rank of the projection test: on an o_proj and a down shape of llama3.1-8b at TP=2 (a warp
// an output), a 1B-like one (the split-K GEMV), and on FP8 weights (e4m3 rows, 128x128 blocks: the
// skinny kernel), five eager calls, then a captured graph replayed
// three times over new inputs, of the one-token projection that sums the ranks' partials itself
// (AddRmsNorm::peer_sum), each beside the fused all-reduce + add + norm kernel on the partial the
// projection stored (which must match the plain linear's). Every call adds to the residual, so the
// two residuals stay equal only if each call's sum over the ranks is equal bit for bit; out may
// differ by the rounding of 1 / rms (its sum of squares reduced in another block's order).
void peer_sum_rank(int rank, const std::string& group) {
  auto backend = make_cuda_backend(0, DType::BF16);
  AllReduceKernelOptions options;
  options.in_projection = true;
  auto comm = make_nccl_communicator(group, rank, 2, *backend, /*disable_custom_all_reduce=*/false, options);
  ASSERT_EQ(comm->name(), "custom+nccl") << "the two GPUs cannot map each other's memory";
  const float eps = 1e-5f;
  struct Case {
    int64_t N, K;
    int fp8_groups;  // 0: bf16 weights; 1: e4m3 rows; K / 128: 128x128 blocks
  };
  for (const Case c : {Case{4096, 2048, 0}, {4096, 7168, 0}, {2048, 1024, 0}, {4096, 2048, 1}, {4096, 7168, 56}}) {
    const int64_t N = c.N, K = c.K;
    const std::string what =
        std::to_string(N) + " x " + std::to_string(K) + ", fp8 groups " + std::to_string(c.fp8_groups);
    const std::optional<PeerSum> ps = comm->peer_sum(1, N, DType::BF16);
    ASSERT_TRUE(ps) << what;
    Backend& be = *backend;
    const auto device = [&](const std::vector<float>& v, const Shape& s, DType dt) { return bench::on(be, v, s, dt); };
    const auto empty = [&](int64_t n, DType dt) { return Tensor::empty({1, n}, dt, be.allocator()); };
    const std::vector<float> wv = bench::randn(size_t(N * K), 100 + rank, 0.02f);
    Tensor w = device(wv, {N, K}, DType::BF16);
    if (c.fp8_groups > 0) {
      w = Tensor::empty({N, K}, DType::F8E4M3, be.allocator())
              .with_scales(Tensor::empty({N, c.fp8_groups}, DType::F32, be.allocator()));
      be.quantize_fp8(device(wv, {N, K}, DType::F32), c.fp8_groups > 1 ? 128 : 1, c.fp8_groups > 1, w);
    }
    const Tensor norm_w = device(bench::randn(size_t(N), 7), {N}, DType::BF16);  // the same on both ranks
    const Tensor x = empty(K, DType::BF16), y = empty(N, DType::BF16), out = empty(N, DType::BF16);
    const Tensor y_ref = empty(N, DType::BF16), out_ref = empty(N, DType::BF16);
    const Tensor res = empty(N, DType::F32), res_ref = empty(N, DType::F32);
    const std::vector<float> res0 = bench::randn(size_t(N), 11);
    be.copy(res, device(res0, {1, N}, DType::F32));
    be.copy(res_ref, device(res0, {1, N}, DType::F32));
    const LinearOp op{.x = x, .w = w, .y = y, .then = AddRmsNorm{res, norm_w, eps, out, true, ps}};
    ASSERT_TRUE(be.folds_peer_sum(op)) << what;
    const auto set_x = [&](int call) {
      be.copy(x, device(bench::randn(size_t(K), 1000 * rank + call), {1, K}, DType::BF16));
    };
    const Tensor y_lin = empty(N, DType::BF16);
    const auto reference_and_check = [&](int call) {
      // The fused kernel on the partial the projection stored; that partial against the plain linear.
      be.copy(y_ref, y);
      comm->all_reduce_add_rms_norm(be, res_ref, y_ref, norm_w, eps, out_ref);
      be.linear(x, w, Tensor(), y_lin);
      EXPECT_LT(test::rel_l2(test::read(be, y), test::read(be, y_lin)), 1e-2) << what << ", call " << call;
      const std::vector<float> r = test::read(be, res), rr = test::read(be, res_ref);
      const std::vector<float> o = test::read(be, out), oref = test::read(be, out_ref);
      int64_t res_wrong = 0, out_wrong = 0;
      for (size_t i = 0; i < r.size(); ++i) {
        res_wrong += r[i] != rr[i];
        out_wrong += std::fabs(o[i] - oref[i]) > std::fabs(oref[i]) / 128.0f;  // a bf16 rounding step
      }
      EXPECT_EQ(res_wrong, 0) << what << ", call " << call;
      EXPECT_EQ(out_wrong, 0) << what << ", call " << call;
      EXPECT_LT(test::rel_l2(o, oref), 1e-2) << what << ", call " << call;
    };
    for (int call = 0; call < 5; ++call) {
      set_x(call);
      be.linear(op);
      reference_and_check(call);
    }
    be.stream().begin_capture();
    be.linear(op);
    const std::unique_ptr<Graph> graph = be.stream().end_capture();
    for (int call = 5; call < 8; ++call) {
      set_x(call);
      graph->replay();
      reference_and_check(call);
    }
  }
  comm->barrier();
}

TEST(CudaTp, ProjectionSumsItsRanksPartialsOnTwoGpus) {
  if (const int rank = tp_test_rank(); rank >= 0) return peer_sum_rank(rank, std::getenv("GS_TP_TEST_GROUP"));
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  run_two_ranks("CudaTp.ProjectionSumsItsRanksPartialsOnTwoGpus", "");
}

}  // namespace
}  // namespace gs
