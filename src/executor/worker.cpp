// The worker loop (with rank 0's optional per-kernel profile of decode steps) and the spawning of
// local worker processes.
#include "executor/worker.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench/kernel_breakdown.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/connection.h"
#include "executor/shm_lane.h"
#include "executor/wire.h"
#include "runner/device_setup.h"
#include "runner/model_runner.h"

extern char** environ;

namespace gs {

namespace {

constexpr double kIdleTimeoutS = 365.0 * 24 * 3600;  // a worker waits for the driver's next step indefinitely

// Rank 0's per-kernel record of its decode steps, by batch size, when the driver asks for it
// (kWorkerKernelProfileEnv: `graphserve bench kernels --tensor-parallel-size N`); written as
// format_kernel_breakdown's tables when the driver shuts the worker down.
class DecodeKernelProfile {
 public:
  static std::unique_ptr<DecodeKernelProfile> from_env(int rank) {
    const char* path = std::getenv(kWorkerKernelProfileEnv);
    if (rank != 0 || !path || !*path) return nullptr;
    std::string why_not;
    auto profiler = make_kernel_profiler(&why_not);
    if (!profiler) {
      spdlog::warn("worker rank 0: no kernel profile ({})", why_not);
      return nullptr;
    }
    const char* top = std::getenv(kWorkerKernelProfileTopEnv);
    return std::unique_ptr<DecodeKernelProfile>(
        new DecodeKernelProfile(path, top ? std::atoi(top) : 20, std::move(profiler)));
  }
  // Starts recording when `batch` is a decode step (one token per request); returns whether it did.
  bool begin(const SchedulerOutput& batch) {
    if (batch.requests.empty() || batch.total_tokens() != int(batch.requests.size())) return false;
    profiler_->start();
    return true;
  }
  void end(const SchedulerOutput& batch, double seconds) {
    Steps& s = by_batch_[int(batch.requests.size())];
    std::vector<KernelRecord> r = profiler_->stop();
    s.records.insert(s.records.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    s.steps += 1;
    s.wall_ms += seconds * 1e3;
  }
  ~DecodeKernelProfile() {
    std::ofstream f(path_);
    for (const auto& [bs, s] : by_batch_)
      f << format_kernel_breakdown(summarize_kernels(s.records, s.steps, s.wall_ms), bs, top_);
    if (!f) spdlog::error("worker rank 0: could not write the kernel profile to {}", path_);
  }

 private:
  struct Steps {
    std::vector<KernelRecord> records;
    int steps = 0;
    double wall_ms = 0;
  };
  DecodeKernelProfile(std::string path, int top, std::unique_ptr<KernelProfiler> p)
      : path_(std::move(path)), top_(top), profiler_(std::move(p)) {}
  std::string path_;
  int top_;
  std::unique_ptr<KernelProfiler> profiler_;
  std::map<int, Steps> by_batch_;
};

StepReply execute(ModelRunner& runner, const SchedulerOutput& batch, bool rank0, DecodeKernelProfile* profile) {
  const bool profiled = profile && profile->begin(batch);
  const auto t0 = std::chrono::steady_clock::now();
  StepReply rep;
  RunnerOutput out = runner.execute(batch);
  rep.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (profiled) profile->end(batch, rep.step_seconds);
  if (rank0) rep.output = std::move(out);
  rep.stats = runner.stats();
  return rep;
}

// Joins the group: rank 0 creates it and tells the driver its id; the others get it in Init.
RunnerConfig receive_config(Connection& conn, int rank) {
  Message init = conn.recv(kIdleTimeoutS, "the driver");
  GS_CHECK(init.type == MsgType::Init, "worker rank {}: expected the runner config, got message {}", rank,
           int(init.type));
  RunnerConfig cfg = decode_runner_config(init.payload);
  cfg.tp_rank = rank;
  if (rank == 0) {
    cfg.tp_group = make_tp_group_id(cfg);
    conn.send(MsgType::GroupId, cfg.tp_group);
  }
  return cfg;
}

// Exits the process when the driver's end of `fd` closes, even while the main thread is stuck
// in a collective whose peer died (NCCL waits forever).
void watch_driver(int fd, int rank) {
  std::thread([fd, rank] {
    for (;;) {
      pollfd p{fd, POLLRDHUP, 0};
      if (poll(&p, 1, 1000) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        spdlog::error("worker rank {}: the driver went away; exiting", rank);
        _exit(3);
      }
    }
  }).detach();
}

// Maps the driver's ShmLane `name` and answers whether it could ("0" from another host), on the
// socket, before the lane carries anything.
void attach_lane(Connection& conn, const std::string& name, int rank) {
  std::unique_ptr<ShmLane> lane;
  try {
    lane = std::make_unique<ShmLane>(name, 1);
  } catch (const Error& e) {
    spdlog::info("worker rank {}: no shared-memory lane to the driver ({}); messages go over TCP", rank, e.what());
  }
  conn.send(MsgType::Lane, lane ? "1" : "0");
  if (lane) conn.attach_lane(std::move(lane));
}

// A run-time LoRA adapter on this rank: reads the adapter and holds its shard (LoraLoad), or drops
// it (LoraUnload). Answers LoraDone, or ErrorReply with the reason, the runner then unchanged (a
// bad adapter is the client's error, not the worker's end).
void handle_lora(Connection& conn, ModelRunner& runner, const Message& m) {
  try {
    const LoraRequest r = decode_lora_request(m.payload);
    if (m.type == MsgType::LoraLoad)
      runner.add_lora(r.id, runner.read_lora(r.name, r.path));
    else
      runner.remove_lora(r.id);
    conn.send(MsgType::LoraDone, "");
  } catch (const Error& e) {
    conn.send(MsgType::ErrorReply, e.what());
  }
}

}  // namespace

int run_worker(const WorkerArgs& a) {
  Connection conn = Connection::connect(a.master_addr, a.master_port, a.connect_timeout_s);
  watch_driver(conn.fd(), a.rank);
  WireWriter hello;
  hello.put(a.rank);
  conn.send(MsgType::Hello, hello.str());
  const RunnerConfig cfg = receive_config(conn, a.rank);
  std::unique_ptr<ModelRunner> runner;
  try {
    runner = std::make_unique<ModelRunner>(cfg);
  } catch (const std::exception& e) {
    conn.send(MsgType::ErrorReply, e.what());
    throw;
  }
  conn.send(MsgType::Ready, encode_limits({runner->num_kv_blocks(), runner->block_size(), runner->max_model_len(),
                                           runner->device_name(), runner->stats()}));
  BatchDecoder decoder;
  const auto profile = DecodeKernelProfile::from_env(a.rank);
  const double spin_s = tp_spin_seconds(runner->device_name().rfind("cuda", 0) == 0);
  for (;;) {
    Message m = conn.recv(kIdleTimeoutS, "the driver", spin_s);
    if (m.type == MsgType::Shutdown) return 0;
    if (m.type == MsgType::Lane) {
      attach_lane(conn, m.payload, a.rank);
      continue;
    }
    if (m.type == MsgType::LoraLoad || m.type == MsgType::LoraUnload) {
      handle_lora(conn, *runner, m);
      continue;
    }
    GS_CHECK(m.type == MsgType::Step, "worker rank {}: unexpected message {}", a.rank, int(m.type));
    try {
      const auto t0 = std::chrono::steady_clock::now();
      StepReply rep = execute(*runner, decoder.decode(m.payload), a.rank == 0, profile.get());
      rep.handle_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      conn.send(MsgType::StepReply, encode_step_reply(rep));
    } catch (const Error& e) {
      conn.send(MsgType::ErrorReply, e.what());  // e.g. a request the runner refuses: the engine isolates it
    }
  }
}

std::string worker_executable() {
  if (const char* e = std::getenv("GRAPHSERVE_EXE"); e && *e) return e;
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

std::vector<int> spawn_workers(const std::string& exe, const std::string& master_addr, int master_port,
                               const std::vector<int>& ranks) {
  // This process's visible GPUs, so each local rank gets one of them.
  std::vector<std::string> gpus;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::stringstream ss(v);
    for (std::string g; std::getline(ss, g, ',');) gpus.push_back(g);
  }
  std::vector<int> pids;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string gpu = gpus.empty() ? std::to_string(i) : gpus[i % gpus.size()];
    std::vector<std::string> args = {exe,
                                     "worker",
                                     "--master-addr",
                                     master_addr,
                                     "--master-port",
                                     std::to_string(master_port),
                                     "--rank",
                                     std::to_string(ranks[i])};
    std::vector<std::string> env = {"CUDA_VISIBLE_DEVICES=" + gpu};
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (auto& s : args) argv.push_back(s.data());
    for (auto& s : env) envp.push_back(s.data());
    argv.push_back(nullptr), envp.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    GS_CHECK(pid >= 0, "fork() of tensor-parallel worker {} failed: {}", ranks[i], std::strerror(errno));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the driver
      if (getppid() != parent) _exit(1);
      execve(exe.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  return pids;
}

void kill_workers(const std::vector<int>& pids) {
  for (int pid : pids) kill(pid, SIGKILL);
  for (int pid : pids) waitpid(pid, nullptr, 0);
}

std::string reap_worker(int pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return "";
  if (WIFSIGNALED(status)) return fmt::format("worker process {} was killed by signal {}", pid, WTERMSIG(status));
  return fmt::format("worker process {} exited with status {}", pid, WEXITSTATUS(status));
}

}  // namespace gs
