// Metrics: the server's Prometheus counters and histograms (text exposition format 0.0.4),
// plus the engine's own counters (EngineStats) rendered at scrape time, under graphserve_*
// names and again under vLLM's vllm:* names with a model_name label (so dashboards made for
// vLLM work). Thread-safe.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/llm_engine.h"
#include "server/histogram.h"

namespace gs {

// What a scrape shows beside the Metrics' own series: the tokens of each engine step (null: not
// tracked) and the KV cache settings (vllm:cache_config_info labels).
struct MetricsEngineView {
  const Histogram* iteration_tokens = nullptr;
  std::map<std::string, std::string> cache_config;
};

class Metrics {
 public:
  Metrics();
  void on_first_token(double ttft_s);
  void on_inter_token(double itl_s);
  // A finished choice: its reason ("stop", "length", "abort"), tokens and latency.
  void on_finished(const std::string& reason, int prompt_tokens, int output_tokens, double e2e_s);
  void on_rejected(int http_status);  // 4xx/5xx answers to generation requests

  // A finished choice's decode time (first token to finish), for vllm:request_decode_time_seconds.
  void on_decode_time(double s);
  // A choice's first token: its queue time (arrival to first scheduled) and prefill time (first
  // scheduled to first token), for vllm:request_queue_time_seconds / request_prefill_time_seconds.
  void on_first_token_phases(double queue_s, double prefill_s);

  std::string render(const EngineStats& engine, int http_in_flight, const std::string& model_name = "",
                     const MetricsEngineView& view = {}) const;

 private:
  void render_vllm(std::string& out, const EngineStats& e, const std::string& model_name,
                   const MetricsEngineView& v) const;
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, decode_, queue_, prefill_;
  Histogram prompt_len_, generation_len_;  // tokens per finished request
  std::map<std::string, uint64_t> finished_;
  std::map<int, uint64_t> rejected_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
};

}  // namespace gs
