// The online-serving benchmark behind `graphserve bench serve`: sends streaming
// /v1/completions or /v1/chat/completions requests to any OpenAI-compatible server (Poisson
// arrivals at a rate, or a fixed concurrency) and measures throughput, TTFT, TPOT and ITL as
// vLLM's benchmark does. Random completion prompts are exactly input_len tokens long (token
// ids from the server's /tokenize; words when it has none).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gs {

struct ServeBenchConfig {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;  // "": the first model of GET /v1/models
  std::string api_key;
  std::string dataset;                       // JSONL ({"prompt": ...} per line) or plain text lines; "": random
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  int input_len = 128;                       // random prompts: tokens (words for chat, or without /tokenize)
  int output_len = 128;                      // max_tokens, with ignore_eos
  int num_prompts = 100;
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  int max_concurrency = 0;                                        // 0: unbounded
  uint64_t seed = 0;
  double timeout_s = 600;  // per request
  // Sampling fields every request sends (temperature, top_p, top_k, min_p); greedy by default.
  nlohmann::json sampling = {{"temperature", 0}};
};

struct RequestResult {
  bool ok = false;
  std::string error;
  double start = 0;  // seconds since the benchmark began
  double ttft = 0, latency = 0;
  int prompt_tokens = 0, output_tokens = 0;
  std::vector<double> itl;  // seconds between consecutive chunks
};

struct ServeBenchResult {
  ServeBenchConfig config;
  std::string model;
  double duration_s = 0;
  std::vector<RequestResult> requests;
  nlohmann::json summary() const;  // counts, throughputs, latency stats (ms)
};

ServeBenchResult run_serve_bench(const ServeBenchConfig& cfg);
std::string format_summary(const nlohmann::json& summary);
// Writes a PNG (TTFT and end-to-end latency per request over time) with gnuplot.
void plot_serve_bench(const ServeBenchResult& r, const std::string& png_path);

}  // namespace gs
