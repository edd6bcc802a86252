// Implements server/stats_logger.h (StatsLogger).
#include "server/stats_logger.h"

#include "core/logging.h"

namespace gs {

namespace {

// vLLM's "SpecDecoding metrics" line over one interval.
void log_spec_decode(const SpecDecodeStats& s, const SpecDecodeStats& last, double dt) {
  const uint64_t drafts = s.num_drafts - last.num_drafts, drafted = s.num_draft_tokens - last.num_draft_tokens;
  const uint64_t accepted = s.num_accepted_tokens - last.num_accepted_tokens;
  if (drafts == 0) return;
  std::string per_pos;
  for (size_t i = 0; i < s.accepted_per_pos.size(); ++i) {
    const uint64_t before = i < last.accepted_per_pos.size() ? last.accepted_per_pos[i] : 0;
    per_pos += fmt::format("{}{:.3f}", i ? ", " : "", double(s.accepted_per_pos[i] - before) / double(drafts));
  }
  spdlog::info(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} tokens/s, Drafted "
      "throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, Per-position acceptance rate: {}, Avg "
      "Draft acceptance rate: {:.1f}%",
      1.0 + double(accepted) / double(drafts), double(accepted) / dt, double(drafted) / dt, accepted, drafted, per_pos,
      drafted ? 100.0 * double(accepted) / double(drafted) : 0.0);
}

}  // namespace

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
    const uint64_t queries = s.prefix_cache_query_tokens - last.prefix_cache_query_tokens;
    const bool busy = prompt > 0 || gen > 0 || s.num_running > 0 || s.num_waiting > 0;
    if (busy && dt > 0) {
      const double kv = s.kv_blocks_total > 0 ? 100.0 * (1.0 - double(s.kv_blocks_free) / s.kv_blocks_total) : 0.0;
      spdlog::info(
          "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, Running: {} "
          "reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
          prompt / dt, gen / dt, s.num_running, s.num_waiting, kv,
          queries > 0 ? 100.0 * double(hits) / double(queries) : 0.0);
      log_spec_decode(s.spec, last.spec, dt);
    }
    last = s;
    last_time = now;
  }
}

}  // namespace gs
