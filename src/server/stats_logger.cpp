// Implements server/stats_logger.h (StatsLogger).
#include "server/stats_logger.h"

#include "core/logging.h"

namespace gs {

StatsLogger::StatsLogger(const EngineClient& client, std::chrono::milliseconds interval)
    : client_(client), interval_(interval), thread_([this] { run(); }) {}

StatsLogger::~StatsLogger() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsLogger::run() {
  EngineStats last = client_.stats();
  auto last_time = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [&] { return stop_; })) {
    const EngineStats s = client_.stats();
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_time).count();
    const uint64_t prompt = s.prompt_tokens - last.prompt_tokens, gen = s.generation_tokens - last.generation_tokens;
    const uint64_t hits = s.prefix_cache_hit_tokens - last.prefix_cache_hit_tokens;
    const bool busy = prompt > 0 || gen > 0 || s.num_running > 0 || s.num_waiting > 0;
    if (busy && dt > 0) {
      const double kv = s.kv_blocks_total > 0 ? 100.0 * (1.0 - double(s.kv_blocks_free) / s.kv_blocks_total) : 0.0;
      spdlog::info(
          "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, Running: {} "
          "reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
          prompt / dt, gen / dt, s.num_running, s.num_waiting, kv,
          prompt > 0 ? 100.0 * double(hits) / double(prompt) : 0.0);
    }
    last = s;
    last_time = now;
  }
}

}  // namespace gs
