// Tensor parallelism through worker processes (the graphserve binary): the engine at TP 2 gives
// TP 1's greedy tokens on stories260K; two "nodes" (the driver's host and a `graphserve worker
// --node-rank 1` process) give the same, and so does one rank in a worker process
// (--distributed-executor-backend mp); a worker that dies or hangs fails the engine loudly
// (requests end with an error, stats().fatal_error names the rank) instead of hanging.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/lora_test_util.h"
#include "golden.h"
#include "model/family_fixtures.h"
#include "multiproc_config.h"
#include "runner/device_setup.h"
#include "test_paths.h"

namespace gs {
namespace {

EngineConfig stories(int tp) {
  EngineConfig c = test::multiproc_stories_config(tp);
  c.worker_timeout_s = 5.0;
  return c;
}

std::vector<int32_t> prompt(const std::string& name) {
  return test::stories_golden(name)["input_ids"].get<std::vector<int32_t>>();
}

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::vector<std::string> errors;
};

Outcome generate(LLMEngine& engine, int max_tokens, std::vector<std::vector<int32_t>> prompts = {}) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  if (prompts.empty())
    for (const char* n : {"short", "long", "digits"}) prompts.push_back(prompt(n));
  for (const auto& ids : prompts) engine.add_request(ids, p);
  Outcome o;
  while (engine.has_unfinished_requests())
    for (const auto& out : engine.step()) {
      auto& t = o.tokens[out.id];
      t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      if (!out.error.empty()) o.errors.push_back(out.error);
    }
  return o;
}

// The pids of this process's children (the workers the executor started).
std::vector<pid_t> child_pids() {
  std::vector<pid_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    for (pid_t p; in >> p;) out.push_back(p);
  }
  return out;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(MultiprocTensorParallel, WorkerProcessesEqualTp1) {
  LLMEngine tp1(stories(1));
  const Outcome ref = generate(tp1, 48);
  LLMEngine tp2(stories(2));
  EXPECT_EQ(child_pids().size(), 2u);
  const Outcome got = generate(tp2, 48);
  EXPECT_TRUE(got.errors.empty());
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(tp2.stats().rank_step_seconds.size(), 2u);
  EXPECT_TRUE(tp2.stats().fatal_error.empty());
  EXPECT_GT(tp2.stats().graphs.steps_full, 0u);
}

// Ranks that busy-poll step over shared-memory lanes (ShmLane): the same tokens, and a worker
// that dies is still found at once.
TEST(MultiprocTensorParallel, SpinningWorkersOverSharedMemoryEqualTp1AndFailLoudly) {
  LLMEngine tp1(stories(1));
  const Outcome ref = generate(tp1, 32);
  setenv("GRAPHSERVE_TP_SPIN_MS", "20", 1);
  {
    LLMEngine tp2(stories(2));
    const Outcome got = generate(tp2, 32);
    EXPECT_TRUE(got.errors.empty());
    EXPECT_EQ(got.tokens, ref.tokens);
    const auto pids = child_pids();
    ASSERT_EQ(pids.size(), 2u);
    for (pid_t p : pids) {  // each worker maps its lane's segment (unlinked once both sides had it)
      std::ifstream maps("/proc/" + std::to_string(p) + "/maps");
      const std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
      EXPECT_NE(all.find("/dev/shm/graphserve-lane-"), std::string::npos) << "worker " << p << " has no lane";
    }
    kill(pids[0], SIGKILL);
    const Outcome o = generate(tp2, 8);
    ASSERT_FALSE(o.errors.empty());
    EXPECT_NE(tp2.stats().fatal_error.find("tensor-parallel worker rank 0 closed"), std::string::npos)
        << tp2.stats().fatal_error;
  }
  unsetenv("GRAPHSERVE_TP_SPIN_MS");
}

// --distributed-executor-backend mp at one rank: the model in one worker process, the same tokens.
TEST(MultiprocTensorParallel, OneRankInAWorkerProcessEqualsInProcess) {
  LLMEngine uni(stories(1));
  EXPECT_TRUE(child_pids().empty());
  const Outcome ref = generate(uni, 32);
  EngineConfig c = stories(1);
  c.distributed_executor_backend = "mp";
  LLMEngine mp(c);
  EXPECT_EQ(child_pids().size(), 1u);
  const Outcome got = generate(mp, 32);
  EXPECT_TRUE(got.errors.empty());
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(mp.stats().rank_step_seconds.size(), 1u);
}

TEST(MultiprocTensorParallel, ExecutorBackendsThatCannotRunTheConfigAreRefused) {
  auto refused = [](EngineConfig c, const std::string& expected) {
    try {
      LLMEngine engine(c);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_TRUE(child_pids().empty());
  };
  EngineConfig uni_tp2 = stories(2);
  uni_tp2.distributed_executor_backend = "uni";
  refused(uni_tp2, "--tensor-parallel-size 2 needs mp");
  EngineConfig ray = stories(1);
  ray.distributed_executor_backend = "ray";
  refused(ray, "must be uni or mp, got 'ray'");
}

TEST(MultiprocTensorParallel, TwoNodesOnOneMachineEqualTp1) {
  LLMEngine tp1(stories(1));
  const Outcome ref = generate(tp1, 32);
  EngineConfig c = stories(2);
  c.nnodes = 2;
  c.master_port = free_port();
  // Node 1: `graphserve worker`, as a second host would run it.
  const pid_t node1 = fork();
  ASSERT_GE(node1, 0);
  if (node1 == 0) {
    const std::string exe = test::graphserve_exe().string(), port = std::to_string(c.master_port);
    execl(exe.c_str(), exe.c_str(), "worker", "--nnodes", "2", "--node-rank", "1", "--tensor-parallel-size", "2",
          "--master-addr", "127.0.0.1", "--master-port", port.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  {
    LLMEngine engine(c);
    const Outcome got = generate(engine, 32);
    EXPECT_EQ(got.tokens, ref.tokens);
  }
  int status = 0;
  waitpid(node1, &status, 0);  // the driver's shutdown ends node 1's worker cleanly
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

void expect_failure_is_loud(int signal, const std::string& expected) {
  LLMEngine engine(stories(2));
  generate(engine, 4);  // healthy first
  const auto pids = child_pids();
  ASSERT_EQ(pids.size(), 2u);
  kill(pids[1], signal);
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = generate(engine, 8);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  ASSERT_FALSE(o.errors.empty());
  const std::string fatal = engine.stats().fatal_error;
  EXPECT_NE(fatal.find(expected), std::string::npos) << fatal;
  EXPECT_NE(fatal.find("tensor-parallel worker rank"), std::string::npos) << fatal;
  EXPECT_EQ(generate(engine, 2).errors.size(), 3u);  // later requests fail at once, with the same error
}

TEST(MultiprocTensorParallel, AWorkerThatDiesFailsTheEngineLoudly) { expect_failure_is_loud(SIGKILL, "closed"); }

TEST(MultiprocTensorParallel, AWorkerThatHangsFailsTheEngineLoudly) {
  expect_failure_is_loud(SIGSTOP, "did not answer");
}

TEST(MultiprocTensorParallel, MoreRanksThanGpusAreRefusedBeforeStarting) {
  if (visible_gpus() >= 2) GTEST_SKIP() << "this host has the GPUs";
  EngineConfig c = stories(2);
  c.device = "cuda";
  try {
    LLMEngine engine(c);
    FAIL() << "TP 2 on " << visible_gpus() << " GPUs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs 2 ranks on this host, one GPU each, but it has"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(child_pids().empty());
}

// --enable-expert-parallel reaches the worker processes: qwen2_moe's fixture (gated shared expert)
// with whole experts a rank, each worker reading only its experts' tensors, gives TP 1's greedy
// tokens at TP 2; a model with fewer routed experts than ranks is refused by name before any
// worker starts.
TEST(MultiprocTensorParallel, ExpertParallelWorkersEqualTp1) {
  EngineConfig c = stories(1);
  c.model = test::family_dir("qwen2_moe").string();
  const auto prompts = test::load_family_fixture("qwen2_moe").prompts;
  LLMEngine tp1(c);
  const Outcome ref = generate(tp1, 24, prompts);
  c.tensor_parallel_size = 2;
  c.enable_expert_parallel = true;
  LLMEngine ep(c);
  const Outcome got = generate(ep, 24, prompts);
  EXPECT_TRUE(got.errors.empty());
  EXPECT_EQ(got.tokens, ref.tokens);

  test::TempDir dir;
  auto j = nlohmann::json::parse(std::ifstream(test::family_dir("qwen3_moe") / "config.json"));
  j["num_local_experts"] = 2;
  std::ofstream(dir.path() / "config.json") << j.dump();
  c.model = dir.path().string();
  c.load_format = "dummy";
  c.tensor_parallel_size = 4;
  try {
    LLMEngine engine(c);
    FAIL() << "4 ranks over 2 experts were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least one routed expert a rank, but the model has 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(child_pids().size(), 2u);  // ep's workers alone
}

TEST(MultiprocTensorParallel, ModelsThatDoNotSplitAreRefusedBeforeStarting) {
  try {
    LLMEngine engine(stories(3));
    FAIL() << "TP 3 over 8 heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide the model's 8 attention heads"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(child_pids().empty());
}

}  // namespace
}  // namespace gs
