// Wire formats of the driver <-> worker messages: the runner config (JSON), scheduled batches
// (binary, only the tokens a worker has not seen yet), runner outputs and limits.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "runner/model_runner.h"
#include "runner/runner_config.h"
#include "types/scheduler_output.h"

namespace gs {

// Appends trivially copyable values, strings and vectors to a byte string.
class WireWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put(const std::string& s) {
    put<uint64_t>(s.size());
    buf_.append(s);
  }
  template <typename T>
  void put_vec(const T* data, size_t n) {
    put<uint64_t>(n);
    buf_.append(reinterpret_cast<const char*>(data), n * sizeof(T));
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put_vec(v.data(), v.size());
  }
  std::string& str() { return buf_; }

 private:
  std::string buf_;
};

// Reads what WireWriter wrote; a short or malformed message is a gs::Error.
class WireReader {
 public:
  explicit WireReader(const std::string& s) : p_(s.data()), end_(s.data() + s.size()) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string get_str() {
    const auto n = get<uint64_t>();
    return std::string(take(n), n);
  }
  template <typename T>
  std::vector<T> get_vec() {
    const auto n = get<uint64_t>();
    std::vector<T> v(n);
    if (n) std::memcpy(static_cast<void*>(v.data()), take(n * sizeof(T)), n * sizeof(T));  // pairs of PODs
    return v;
  }

 private:
  const char* take(uint64_t n) {
    GS_CHECK(uint64_t(end_ - p_) >= n, "malformed tensor-parallel message ({} bytes short)", n - uint64_t(end_ - p_));
    const char* q = p_;
    p_ += n;
    return q;
  }
  const char* p_;
  const char* end_;
};

std::string encode_runner_config(const RunnerConfig& cfg);
RunnerConfig decode_runner_config(const std::string& s);

// What the driver learns from each worker once its runner is built.
struct WorkerLimits {
  int num_kv_blocks = 0, block_size = 0, max_model_len = 0;
  std::string device;  // "cuda:0 (NVIDIA H200)"
  RunnerStats stats;   // after start-up (graphs captured)
};
std::string encode_limits(const WorkerLimits& l);
WorkerLimits decode_limits(const std::string& s);

// A run-time LoRA adapter that every rank reads from `path` and holds as `id` (MsgType::LoraLoad),
// or drops (LoraUnload: the id alone counts).
struct LoraRequest {
  int id = 0;
  std::string name, path;
};
std::string encode_lora_request(const LoraRequest& r);
LoraRequest decode_lora_request(const std::string& s);

// A worker's answer to one step: rank 0's outputs (empty for other ranks), its stats and the
// seconds its execute() took.
struct StepReply {
  RunnerOutput output;
  RunnerStats stats;
  double step_seconds = 0;    // the runner's execute()
  double handle_seconds = 0;  // from the step's message read to its reply made (decode + execute)
};
std::string encode_step_reply(const StepReply& r);
StepReply decode_step_reply(const std::string& s);

// The driver's side of the batch stream: remembers how many tokens of each request every worker
// holds, so a step sends only new tokens (sampling parameters with a request's first step).
// Requests absent from a step are dropped on both sides; if they return (after preemption) they
// are sent whole again.
class BatchEncoder {
 public:
  std::string encode(const SchedulerOutput& batch);

 private:
  std::unordered_map<RequestId, size_t> sent_;  // tokens the workers hold per request
};

// The worker's side: rebuilds the SchedulerOutput, whose pointers stay valid until the next decode.
class BatchDecoder {
 public:
  const SchedulerOutput& decode(const std::string& s);

 private:
  struct Held {
    std::vector<int32_t> tokens, blocks;
    SamplingParams params;
  };
  std::unordered_map<RequestId, Held> held_;
  SchedulerOutput out_;
};

}  // namespace gs
