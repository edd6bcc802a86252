// The vllm:* metric names and types with a model_name label (vLLM's Prometheus exposition), so
// Grafana dashboards made for vLLM work against graphserve.
#include <fmt/format.h>

#include "server/metrics.h"

namespace gs {

namespace {

std::string escaped(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') o += '\\';
    o += c;
  }
  return o;
}

void metric(std::string& out, const char* type, const char* name, const char* help, const std::string& labels,
            double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, labels, v);
}

// vLLM's spec-decode counters, with speculative decoding on.
void render_spec_decode(std::string& out, const SpecDecodeStats& s, const std::string& l) {
  if (s.accepted_per_pos.empty()) return;
  metric(out, "counter", "vllm:spec_decode_num_drafts_total", "Proposal runs verified.", l, double(s.num_drafts));
  metric(out, "counter", "vllm:spec_decode_num_draft_tokens_total", "Proposed tokens verified.", l,
         double(s.num_draft_tokens));
  metric(out, "counter", "vllm:spec_decode_num_accepted_tokens_total", "Proposed tokens accepted.", l,
         double(s.num_accepted_tokens));
  metric(out, "counter", "vllm:spec_decode_num_emitted_tokens_total", "Tokens emitted by verification steps.", l,
         double(s.num_emitted_tokens));
  out +=
      "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted proposals per position.\n"
      "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n";
  for (size_t i = 0; i < s.accepted_per_pos.size(); ++i)
    out += fmt::format("vllm:spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", l, i,
                       s.accepted_per_pos[i]);
}

}  // namespace

void Metrics::render_vllm(std::string& out, const EngineStats& e, const std::string& model_name,
                          const MetricsEngineView& v) const {
  const std::string l = fmt::format("model_name=\"{}\"", escaped(model_name));
  metric(out, "gauge", "vllm:num_requests_running", "Requests in the running batch.", l, e.num_running);
  metric(out, "gauge", "vllm:num_requests_waiting", "Requests waiting to be scheduled.", l, e.num_waiting);
  const double usage = e.kv_blocks_total > 0 ? 1.0 - double(e.kv_blocks_free) / e.kv_blocks_total : 0.0;
  metric(out, "gauge", "vllm:kv_cache_usage_perc", "KV cache usage (1 means 100 percent).", l, usage);
  metric(out, "counter", "vllm:prompt_tokens_total", "Prompt tokens processed.", l, double(e.prompt_tokens));
  metric(out, "counter", "vllm:generation_tokens_total", "Generated tokens.", l, double(e.generation_tokens));
  metric(out, "counter", "vllm:num_preemptions_total", "Preemptions.", l, e.num_preemptions);
  metric(out, "counter", "vllm:prefix_cache_queries_total", "Tokens looked up in the prefix cache.", l,
         double(e.prefix_cache_query_tokens));
  metric(out, "counter", "vllm:prefix_cache_hits_total", "Tokens found in the prefix cache.", l,
         double(e.prefix_cache_hit_tokens));
  render_spec_decode(out, e.spec, l);
  out +=
      "# HELP vllm:request_success_total Finished requests by finish reason.\n"
      "# TYPE vllm:request_success_total counter\n";
  for (const auto& [reason, n] : finished_)
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", l, reason, n);
  ttft_.render(out, "vllm:time_to_first_token_seconds", "Time to first token.", l);
  itl_.render(out, "vllm:inter_token_latency_seconds", "Time between consecutive outputs of a request.", l);
  itl_.render(out, "vllm:time_per_output_token_seconds", "Time per output token (between consecutive outputs).", l);
  prompt_len_.render(out, "vllm:request_prompt_tokens", "Prompt tokens of each finished request.", l);
  generation_len_.render(out, "vllm:request_generation_tokens", "Generated tokens of each finished request.", l);
  if (v.iteration_tokens)
    v.iteration_tokens->render(out, "vllm:iteration_tokens_total", "Tokens (prompt and generated) per engine step.", l);
  if (!v.cache_config.empty()) {
    std::string labels;
    for (const auto& [k, val] : v.cache_config) labels += fmt::format(",{}=\"{}\"", k, escaped(val));
    out += fmt::format(
        "# HELP vllm:cache_config_info Information of the LLMEngine's CacheConfig.\n"
        "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{}}} 1\n",
        labels.substr(1));
  }
  e2e_.render(out, "vllm:e2e_request_latency_seconds", "Request latency from arrival to finish.", l);
  decode_.render(out, "vllm:request_decode_time_seconds", "Time from the first token to the finish.", l);
  queue_.render(out, "vllm:request_queue_time_seconds", "Time from arrival to the first scheduling.", l);
  prefill_.render(out, "vllm:request_prefill_time_seconds", "Time from the first scheduling to the first token.", l);
}

}  // namespace gs
