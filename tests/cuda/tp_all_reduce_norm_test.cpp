// The fused all-reduce + residual add + RMSNorm of the tensor-parallel communicator on two GPUs:
// one process per rank (this test binary re-executed with the rank in its environment, as the
// workers run), each comparing the fused kernel (the flagless one, then with
// AllReduceKernelOptions::lamport off the one with the barrier) with the one-shot all-reduce then the backend's
// add_rms_norm, after every earlier size's timed graph replays (so the flagless kernel's buffers have been reused and
// refilled across sizes). Skips with fewer than two GPUs.
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

constexpr const char* kTest = "CudaTp.FusedAllReduceAddRmsNormEqualsTheTwoOpsOnTwoGpus";

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

// One rank, in its own process with one visible GPU; lamport: the fused kernel's variant.
void run_rank(int rank, const std::string& group, bool lamport) {
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
  if (const char* r = std::getenv("GS_TP_TEST_RANK")) {  // a re-executed rank
    const char* lamport = std::getenv("GS_TP_TEST_LAMPORT");
    run_rank(std::atoi(r), std::getenv("GS_TP_TEST_GROUP"), lamport == nullptr || std::strcmp(lamport, "0") != 0);
    return;
  }
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const std::string exe = std::string("/proc/") + std::to_string(getpid()) + "/exe";
  std::vector<std::string> gpus{"0", "1"};  // rank r takes the r-th GPU this process sees
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    gpus.clear();
    std::stringstream ss(v);
    for (std::string g; std::getline(ss, g, ',');) gpus.push_back(g);
    ASSERT_GE(gpus.size(), 2u);
  }
  // Both fused kernels: the flagless (Lamport) one, the default, and the one with the barrier.
  for (const char* lamport : {"1", "0"}) {
    const std::string group = make_nccl_group_id();
    std::vector<pid_t> pids;
    for (int r = 0; r < 2; ++r) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        setenv("GS_TP_TEST_RANK", std::to_string(r).c_str(), 1);
        setenv("GS_TP_TEST_GROUP", group.c_str(), 1);
        setenv("GS_TP_TEST_LAMPORT", lamport, 1);  // the re-executed rank's option (the test's own variable)
        setenv("CUDA_VISIBLE_DEVICES", gpus[size_t(r)].c_str(), 1);
        const std::string filter = std::string("--gtest_filter=") + kTest;
        execl(exe.c_str(), exe.c_str(), filter.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      pids.push_back(pid);
    }
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(wait_for(pids[size_t(r)], 180.0), 0) << "rank " << r << ", lamport " << lamport << " failed";
  }
}

}  // namespace
}  // namespace gs
