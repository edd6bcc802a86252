// Connection: length-framed messages over a TCP socket between the driver and a worker, with
// deadlines on every wait, so a peer that dies (EOF) or hangs (timeout) is an error, never a hang.
// On one host a shared-memory lane (executor/shm_lane.h), once attached, carries what fits.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gs {

enum class MsgType : uint32_t {
  Hello = 1,   // worker -> driver: its rank
  Init,        // driver -> worker: the runner config (and the group to join, for ranks > 0)
  GroupId,     // rank 0 -> driver: the group it created (shared-memory name or NCCL unique id)
  Ready,       // worker -> driver: the runner's limits
  Step,        // driver -> workers: one scheduled batch
  StepReply,   // worker -> driver: the sampled tokens (rank 0) or an empty ack, and its step time
  ErrorReply,  // worker -> driver: an error message instead of a reply
  Shutdown,    // driver -> workers: exit
  Lane,        // driver -> worker: a ShmLane's name to map; worker -> driver: "1" mapped, "0" not
  LoraLoad,    // driver -> workers: a run-time LoRA adapter to read, shard and hold (LoraRequest)
  LoraUnload,  // driver -> workers: a LoRA adapter to drop (LoraRequest, its id)
  LoraDone,    // worker -> driver: the LoRA adapter was loaded or dropped (else ErrorReply)
};

struct Message {
  MsgType type;
  std::string payload;
};

class ShmLane;

class Connection {
 public:
  Connection() = default;  // not connected (fd() < 0)
  explicit Connection(int fd);
  ~Connection();
  Connection(Connection&& o) noexcept;
  Connection& operator=(Connection&& o) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects to host:port, retrying until timeout_s (the listener may not be up yet).
  static Connection connect(const std::string& host, int port, double timeout_s);

  // From here on, messages go through `lane` where they fit (both ends attach theirs at the same
  // point of the stream; messages go one at a time each way, request then reply, so the lane and
  // the socket never reorder them).
  void attach_lane(std::unique_ptr<ShmLane> lane);
  bool has_lane() const { return lane_ != nullptr; }

  void send(MsgType type, const std::string& payload);
  // The next message; throws gs::Error on EOF (peer gone) or after timeout_s seconds. For the
  // first spin_s seconds it polls without sleeping (a woken process starts late: see
  // tp_spin_seconds).
  Message recv(double timeout_s, const std::string& peer, double spin_s = 0);
  // Whether recv() would return at once: a message on the lane, or data or end of stream on the socket.
  bool ready() const;
  int fd() const { return fd_; }

 private:
  bool read_exact(void* p, size_t n, double deadline_s, const std::string& peer, double spin_until_s = 0);
  // The next message, or nothing at the deadline.
  std::optional<Message> recv_socket(double deadline, const std::string& peer, double spin_until_s);
  std::optional<Message> recv_lane(double deadline, const std::string& peer, double spin_until_s);
  int fd_ = -1;
  std::unique_ptr<ShmLane> lane_;
};

// The index of a connection with a message (or end of stream) to read, or -1 after timeout_s;
// polls without sleeping for the first spin_s seconds (then, with lanes, every millisecond).
int wait_any(const std::vector<const Connection*>& conns, double timeout_s, double spin_s = 0);

// How long the driver and the workers of GPU ranks busy-poll for the next step's message or
// reply before they sleep in poll() (a process woken from poll() starts its step late; vLLM's
// workers poll too): $GRAPHSERVE_TP_SPIN_MS milliseconds, default kTpSpinMs (0: sleep at once).
// The wake-up it saves is a visible share of a decode step (docs/PERF.md). CPU ranks spin only
// when the variable says so: they need the cores. Ranks that spin step over shared memory
// (ShmLane) unless GRAPHSERVE_TP_SHM=0.
inline constexpr double kTpSpinMs = 50;
double tp_spin_seconds(bool gpu_ranks);

// A listening TCP socket (port 0: an ephemeral port).
class Listener {
 public:
  Listener(const std::string& host, int port);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int port() const { return port_; }
  // The next connection; throws gs::Error after timeout_s seconds.
  Connection accept(double timeout_s, const std::string& waiting_for);

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace gs
