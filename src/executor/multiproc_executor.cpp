// MultiprocExecutor: one worker process per rank (executor/worker.h): tensor parallelism, or one
// rank out of this process (--distributed-executor-backend mp).
//
// The driver (this process: scheduler, API server) listens on --master-addr:--master-port, starts
// this host's ranks (other hosts run `graphserve worker --node-rank k ...`), hands every rank the
// runner config (and the group rank 0 created), then sends each step's batch to every rank and
// takes the sampled tokens from rank 0 (over a shared-memory lane per local worker where the ranks
// busy-poll, executor/shm_lane.h). Every rank answers every step, so a rank that exits (end of stream)
// or hangs (no answer within worker_timeout_s) is found at once: the executor fails for good with
// an error naming the rank, and the engine reports itself unhealthy. Run-time LoRA adapters reach
// every rank between steps: the driver checks an adapter where it is read (the errors of one
// process), then each rank reads it and keeps its own shard; a load that fails anywhere is undone
// on the ranks where it succeeded.
#include <chrono>
#include <cstdlib>

#include "core/env.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/connection.h"
#include "executor/executor.h"
#include "executor/shm_lane.h"
#include "executor/wire.h"
#include "executor/worker.h"
#include "model/lora_adapter.h"
#include "model/lora_slots.h"
#include "model/model_factory.h"
#include "runner/device_setup.h"

namespace gs {
namespace {

constexpr double kStartupTimeoutS = 1800.0;  // connect and load weights (an 8B checkpoint from a slow disk)

ModelConfig driver_model_config(const RunnerConfig& cfg) {
  ModelConfig m = resolve_model_config(model_source(cfg));
  // Refuses a model that does not split, before any process starts.
  make_tp_layout(m, 0, cfg.tensor_parallel_size, cfg.enable_expert_parallel);
  return m;
}

class MultiprocExecutor final : public Executor {
 public:
  explicit MultiprocExecutor(const EngineConfig& cfg)
      : cfg_(cfg),
        mcfg_(driver_model_config(cfg)),
        world_(cfg.tensor_parallel_size),
        device_(uses_cuda(cfg.device) ? "cuda" : "cpu") {
    GS_CHECK(cfg.nnodes >= 1 && world_ % cfg.nnodes == 0,
             "--tensor-parallel-size {} must split evenly over --nnodes {}", world_, cfg.nnodes);
    GS_CHECK(cfg.node_rank == 0, "graphserve serve / generate run on node 0; other nodes run `graphserve worker`");
    GS_CHECK(cfg.nnodes == 1 || cfg.master_port > 0, "--nnodes {} needs --master-port (and --master-addr)", cfg.nnodes);
    listener_ = std::make_unique<Listener>(cfg.nnodes == 1 ? "127.0.0.1" : "0.0.0.0", cfg.master_port);
    local_ranks_ = world_ / cfg.nnodes;
    std::vector<int> local;
    for (int r = 0; r < local_ranks_; ++r) local.push_back(r);
    check_local_gpus();
    pids_ = spawn_workers(worker_executable(), "127.0.0.1", listener_->port(), local);
    try {
      start();
    } catch (const std::exception& e) {
      kill_workers(pids_);
      throw;
    }
  }

  ~MultiprocExecutor() override {
    timing_.log();
    for (auto& c : conns_) {
      try {
        c.send(MsgType::Shutdown, "");
      } catch (const std::exception&) {  // already gone
      }
    }
    // Each worker closes its end when it has shut down (other hosts' workers then exit 0).
    for (auto& c : conns_) {
      try {
        c.recv(10.0, "a worker shutting down");
      } catch (const std::exception&) {  // end of stream: done
      }
    }
    kill_workers(pids_);
  }

  RunnerOutput execute(const SchedulerOutput& batch) override {
    GS_CHECK(broken_.empty(), "{}", broken_);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = enc_.encode(batch);
    std::string error;
    StepReply rank0;
    try {
      for (auto& c : conns_) c.send(MsgType::Step, msg);
      const auto sent = std::chrono::steady_clock::now();
      receive_from_all(cfg_.worker_timeout_s, spin_s_, "did not answer (it hangs, or a peer rank it waits for died)",
                       [&](int r, const Message& m) {
                         if (m.type == MsgType::ErrorReply) {
                           if (error.empty()) error = m.payload;
                           return;
                         }
                         StepReply rep = decode_step_reply(m.payload);
                         step_seconds_[size_t(r)] = rep.step_seconds;
                         if (r == 0) rank0 = std::move(rep);
                       });
      timing_.add(t0, sent, rank0);
    } catch (const Error& e) {
      fail_for_good(e.what());
    }
    GS_CHECK(error.empty(), "{}", error);  // a batch the runners refused (the engine isolates its requests)
    stats_ = rank0.stats;
    return std::move(rank0.output);
  }

  // The checks every rank makes (and TP = 1's errors), on the caller's thread; the image names the
  // adapter for add_lora, which has each rank read its shard.
  std::shared_ptr<const LoraSlotImage> read_lora(const std::string& name, const std::string& path) const override {
    GS_CHECK(cfg_.enable_lora, "LoRA is not enabled: start with --enable-lora to load adapters");
    load_lora_adapter(name, path, mcfg_, cfg_.max_lora_rank);
    auto image = std::make_shared<LoraSlotImage>();
    image->name = name;
    image->path = path;
    return image;
  }

  void add_lora(int id, std::shared_ptr<const LoraSlotImage> image) override {
    GS_CHECK(image != nullptr, "internal error: LoRA adapter id {} without an image", id);
    std::vector<int> holding;
    const std::string error = lora_round(MsgType::LoraLoad, {id, image->name, image->path}, all_ranks(), holding);
    if (error.empty()) return;
    if (!holding.empty()) {  // undo it where it loaded: no rank may hold an adapter the engine does not serve
      std::vector<int> dropped;
      const std::string undo = lora_round(MsgType::LoraUnload, {id, image->name, image->path}, holding, dropped);
      if (!undo.empty()) spdlog::error("LoRA adapter id {}: undoing a failed load: {}", id, undo);
    }
    throw Error(error);
  }

  void remove_lora(int id) override {
    std::vector<int> dropped;
    const std::string error = lora_round(MsgType::LoraUnload, {id, "", ""}, all_ranks(), dropped);
    GS_CHECK(error.empty(), "{}", error);
  }

  const ModelConfig& model_config() const override { return mcfg_; }
  int num_kv_blocks() const override { return limits_.num_kv_blocks; }
  int block_size() const override { return limits_.block_size; }
  int max_model_len() const override { return limits_.max_model_len; }
  RunnerStats stats() const override { return stats_; }
  std::string device_name() const override { return fmt::format("{} x {}", world_, limits_.device); }
  std::vector<double> rank_step_seconds() const override { return step_seconds_; }
  std::string fatal_error() const override { return broken_; }

 private:
  std::string peer(int r) const { return fmt::format("tensor-parallel worker rank {}", r); }
  std::vector<int> all_ranks() const {
    std::vector<int> r(size_t(world_), 0);
    for (int i = 0; i < world_; ++i) r[size_t(i)] = i;
    return r;
  }

  // Sends `req` as message `type` to `ranks` and waits for each one's answer; `done` gets the ranks
  // that answered LoraDone. Returns the first rank's error ("" when none). A rank that died or hangs
  // fails the executor for good, as in a step.
  std::string lora_round(MsgType type, const LoraRequest& req, const std::vector<int>& ranks, std::vector<int>& done) {
    GS_CHECK(broken_.empty(), "{}", broken_);
    const std::string msg = encode_lora_request(req);
    std::string error;
    try {
      for (int r : ranks) conns_[size_t(r)].send(type, msg);
      receive_from(ranks, cfg_.worker_timeout_s, spin_s_, "did not answer a LoRA adapter's load or unload",
                   [&](int r, const Message& m) {
                     if (m.type == MsgType::LoraDone) {
                       done.push_back(r);
                       return;
                     }
                     GS_CHECK(m.type == MsgType::ErrorReply, "{} answered a LoRA request with message {}", peer(r),
                              int(m.type));
                     spdlog::warn("LoRA adapter '{}' (id {}) on {}: {}", req.name, req.id, peer(r), m.payload);
                     if (error.empty()) error = m.payload;
                   });
    } catch (const Error& e) {
      fail_for_good(e.what());
    }
    return error;
  }

  // One message from every rank, take(rank, message) each, in the order they come: a rank that
  // failed or exited is seen at once, not after the timeout of a peer that waits for it in a
  // collective. Throws gs::Error naming the first rank still silent after timeout_s: "<rank>
  // <silent> within <timeout_s> s".
  template <typename Take>
  void receive_from_all(double timeout_s, double spin_s, const char* silent, const Take& take) {
    receive_from(all_ranks(), timeout_s, spin_s, silent, take);
  }
  // The same from `ranks` alone.
  template <typename Take>
  void receive_from(std::vector<int> pending, double timeout_s, double spin_s, const char* silent, const Take& take) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!pending.empty()) {
      std::vector<const Connection*> waiting;
      for (int r : pending) waiting.push_back(&conns_[size_t(r)]);
      const double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int i = wait_any(waiting, std::max(0.0, left), spin_s);
      GS_CHECK(i >= 0, "{} {} within {:.0f} s", peer(pending.front()), silent, timeout_s);
      const int r = pending[size_t(i)];
      pending.erase(pending.begin() + i);
      take(r, conns_[size_t(r)].recv(timeout_s, peer(r)));
    }
  }

  // Every rank of this host needs a GPU of its own, checked before any process starts: one without
  // would run on the CPU (device auto) or fail while its peers wait in NCCL's set-up.
  void check_local_gpus() const {
    if (device_ != "cuda") return;
    const int gpus = visible_gpus();
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    GS_CHECK(gpus >= local_ranks_,
             "--tensor-parallel-size {} runs {} rank{} on this host, one GPU each, but it has {} GPU{} visible{}: "
             "lower --tensor-parallel-size, or spread the ranks over hosts with --nnodes",
             world_, local_ranks_, local_ranks_ == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s",
             visible ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : "");
  }

  // Accepts every rank, lets rank 0 create the group, sends the others the group, waits for all.
  void start() {
    conns_.resize(size_t(world_));
    for (int i = 0; i < world_; ++i) {
      Connection c = accept_worker(world_ - i);
      const Message hello = c.recv(60.0, "a connecting worker");
      GS_CHECK(hello.type == MsgType::Hello, "a process on the master port is not a graphserve worker");
      const int r = WireReader(hello.payload).get<int>();
      GS_CHECK(r >= 0 && r < world_ && conns_[size_t(r)].fd() < 0, "worker rank {} is invalid or connected twice", r);
      conns_[size_t(r)] = std::move(c);
    }
    RunnerConfig rc = cfg_;
    rc.tp_group.clear();
    rc.device = device_;                                       // "auto" means the same on every rank
    if (cfg_.nnodes > 1) rc.disable_custom_all_reduce = true;  // peer memory reaches one host only
    conns_[0].send(MsgType::Init, encode_runner_config(rc));
    const Message g = conns_[0].recv(kStartupTimeoutS, peer(0));
    GS_CHECK(g.type == MsgType::GroupId, "{} failed to create the group: {}", peer(0), g.payload);
    rc.tp_group = g.payload;
    for (int r = 1; r < world_; ++r) conns_[size_t(r)].send(MsgType::Init, encode_runner_config(rc));
    std::vector<WorkerLimits> limits(static_cast<size_t>(world_));
    receive_from_all(kStartupTimeoutS, 0.0, "did not start", [&](int r, const Message& m) {
      GS_CHECK(m.type == MsgType::Ready, "{} failed to start: {}", peer(r), m.payload);
      limits[size_t(r)] = decode_limits(m.payload);
      spdlog::info("tensor parallel: rank {} of {} on {} ({} KV blocks)", r, world_, limits[size_t(r)].device,
                   limits[size_t(r)].num_kv_blocks);
    });
    limits_ = limits[0], stats_ = limits[0].stats;
    for (const WorkerLimits& l : limits) limits_.num_kv_blocks = std::min(limits_.num_kv_blocks, l.num_kv_blocks);
    step_seconds_.assign(size_t(world_), 0.0);
    spin_s_ = tp_spin_seconds(limits_.device.rfind("cuda", 0) == 0);
    if (spin_s_ > 0 && !env_is("GRAPHSERVE_TP_SHM", "0"))
      for (int r = 0; r < local_ranks_; ++r) attach_lane(r);
  }

  // Offers rank r, one this process started, a shared-memory lane for its steps (ShmLane; other
  // hosts' ranks stay on TCP). Only where the ranks spin: a lane's receiver that stopped spinning
  // wakes late.
  void attach_lane(int r) {
    Connection& c = conns_[size_t(r)];
    auto lane = std::make_unique<ShmLane>(ShmLane::make_name(), 0);
    c.send(MsgType::Lane, lane->name());
    const Message m = c.recv(60.0, peer(r));
    GS_CHECK(m.type == MsgType::Lane, "{} answered the lane offer with message {}", peer(r), int(m.type));
    lane->unlink_name();
    if (m.payload == "1") c.attach_lane(std::move(lane));
    spdlog::info("tensor parallel: rank {} steps over {}", r, c.has_lane() ? "shared memory" : "TCP");
  }

  // The next worker's connection; a local worker that exits first is an error at once.
  Connection accept_worker(int missing) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      for (int pid : pids_)
        if (std::string s = reap_worker(pid); !s.empty()) fail("tensor-parallel worker failed to start: {}", s);
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      try {
        return listener_->accept(1.0, "");
      } catch (const Error&) {
        GS_CHECK(waited < kStartupTimeoutS,
                 "{} of {} tensor-parallel workers did not connect within {:.0f} s (port {})", missing, world_,
                 kStartupTimeoutS, listener_->port());
      }
    }
  }

  [[noreturn]] void fail_for_good(const std::string& why) {
    std::string exits;
    for (int pid : pids_)
      if (std::string s = reap_worker(pid); !s.empty()) exits += "; " + s;
    broken_ = fmt::format("tensor-parallel workers failed: {}{}; the engine cannot continue (restart it)", why, exits);
    spdlog::error("{}", broken_);
    kill_workers(pids_);
    pids_.clear();
    conns_.clear();
    throw Error(broken_);
  }

  // Where a step's time goes on the driver's side, logged at shutdown: the round trip to the
  // workers is what one GPU in this process (--distributed-executor-backend uni) does not pay.
  struct StepTiming {
    using Clock = std::chrono::steady_clock;
    uint64_t steps = 0;
    double total = 0, send = 0, handle = 0, runner = 0;
    void add(Clock::time_point t0, Clock::time_point sent, const StepReply& rank0) {
      const auto s = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
      ++steps, total += s(Clock::now() - t0), send += s(sent - t0);
      handle += rank0.handle_seconds, runner += rank0.step_seconds;
    }
    void log() const {
      if (steps == 0) return;
      const double us = 1e6 / double(steps);
      spdlog::info(
          "tensor parallel: {} steps, per step {:.1f} us in the driver = encode + send {:.1f} + rank 0's runner {:.1f} "
          "+ its decode {:.1f} + the rest (transport, replies, the other ranks) {:.1f}",
          steps, total * us, send * us, runner * us, (handle - runner) * us, (total - send - handle) * us);
    }
  };

  EngineConfig cfg_;
  ModelConfig mcfg_;
  int world_;
  std::string device_;   // "cuda" or "cpu" for every rank (cfg.device resolved once)
  int local_ranks_ = 0;  // ranks 0 .. local_ranks_ - 1 run on this host
  std::unique_ptr<Listener> listener_;
  std::vector<int> pids_;
  std::vector<Connection> conns_;  // by rank
  WorkerLimits limits_;
  BatchEncoder enc_;
  RunnerStats stats_;
  std::vector<double> step_seconds_;
  StepTiming timing_;
  double spin_s_ = 0;  // busy-polls for the replies this long (tp_spin_seconds)
  std::string broken_;
};

}  // namespace

std::unique_ptr<Executor> make_multiproc_executor(const EngineConfig& cfg) {
  return std::make_unique<MultiprocExecutor>(cfg);
}

}  // namespace gs
