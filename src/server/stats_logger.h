// StatsLogger: while serving, logs one line every interval with the engine's throughput and
// load, as vLLM does: prompt and generation tokens/s, running and waiting requests, KV cache
// usage and prefix-cache hit rate. Quiet while the server is idle. Owns its thread (RAII).
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/engine_client.h"

namespace gs {

class StatsLogger {
 public:
  StatsLogger(const EngineClient& client, std::chrono::milliseconds interval);
  ~StatsLogger();
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

 private:
  void run();

  const EngineClient& client_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gs
