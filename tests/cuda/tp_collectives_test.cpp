// The tensor-parallel communicator's custom collectives on two GPUs, one process per rank (this
// test binary re-executed with the rank in its environment, as the workers run):
// - the fused all-reduce + residual add + RMSNorm (the flagless kernel, then with
//   AllReduceKernelOptions::lamport off the one with the barrier) against the one-shot
//   all-reduce then the backend's add_rms_norm, after every earlier size's timed graph replays
//   (so the flagless kernel's buffers have been reused and refilled across sizes);
// - the column gather of vocab-parallel logits, eager and replayed in a graph, against every
//   rank's block at its columns.
// Skips with fewer than two GPUs.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace gs
