// graphserve bench serve: the online-serving benchmark against any OpenAI-compatible server.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include <optional>

#include "apps/commands.h"
#include "apps/sampling_flags.h"

#include "bench/serve_bench.h"
#include "core/error.h"

namespace gs {

void add_bench_serve(CLI::App& bench) {
  auto cfg = std::make_shared<ServeBenchConfig>();
  auto out = std::make_shared<std::pair<std::string, std::string>>();  // json, png
  auto* cmd = bench.add_subcommand("serve", "online serving benchmark against an OpenAI-compatible server");
  auto host_port = std::make_shared<std::pair<std::string, int>>("", 0);
  cmd->add_option("--base-url", cfg->base_url, "server URL")->capture_default_str();
  cmd->add_option("--host", host_port->first, "server host (with --port: instead of --base-url)");
  cmd->add_option("--port", host_port->second, "server port")->check(CLI::Range(1, 65535));
  cmd->add_option("--endpoint", cfg->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  cmd->add_option("--model", cfg->model, "model name (default: the first of /v1/models)");
  cmd->add_option("--api-key", cfg->api_key, "bearer token")->envname("OPENAI_API_KEY");
  cmd->add_option("--dataset,--dataset-path", cfg->dataset,
                  "prompts file: JSONL with \"prompt\" or plain lines (default: random)");
  cmd->add_option_function<std::string>(
      "--extra-body",
      [cfg](const std::string& v) {
        auto j = nlohmann::json::parse(v, nullptr, false);
        GS_CHECK(j.is_object(), "--extra-body must be a JSON object, got '{}'", v);
        cfg->sampling.update(j);
      },
      "JSON fields every request also sends (e.g. a response_format: a structured-output load)");
  cmd->add_option_function<std::string>(
      "--dataset-name",
      [](const std::string& v) {
        GS_CHECK(v == "random" || v == "custom", "--dataset-name: random or custom, got '{}'", v);
      },
      "random (the default), or custom with --dataset-path");
  cmd->add_option("--input-len,--random-input-len", cfg->input_len, "random prompt length in tokens")
      ->capture_default_str();
  cmd->add_option("--output-len,--random-output-len", cfg->output_len, "tokens to generate per request (ignore_eos)")
      ->capture_default_str();
  cmd->add_option("--num-prompts", cfg->num_prompts, "requests to send")->capture_default_str();
  cmd->add_option("--request-rate", cfg->request_rate, "Poisson arrival rate, requests/s (inf: all at once)")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", cfg->max_concurrency, "most requests in flight (0: no bound)")
      ->capture_default_str();
  cmd->add_option("--seed", cfg->seed, "seed of prompts and arrivals")->capture_default_str();
  cmd->add_option("--timeout", cfg->timeout_s, "seconds per request")->capture_default_str();
  auto sampling = std::make_shared<SamplingFlags>();
  add_sampling_flags(*cmd, *sampling, "greedy: temperature 0");
  cmd->add_option("--output-json", out->first, "write the results here");
  cmd->add_option("--plot", out->second, "write a PNG of TTFT and latency per request (gnuplot)");
  cmd->callback([cfg, out, host_port, sampling] {
    if (!host_port->first.empty() || host_port->second > 0)
      cfg->base_url = fmt::format("http://{}:{}", host_port->first.empty() ? "127.0.0.1" : host_port->first,
                                  host_port->second > 0 ? host_port->second : 8000);
    for (const auto& [key, value] : std::initializer_list<std::pair<const char*, std::optional<double>>>{
             {"temperature", sampling->temperature},
             {"top_p", sampling->top_p},
             {"min_p", sampling->min_p},
             {"repetition_penalty", sampling->repetition_penalty},
             {"presence_penalty", sampling->presence_penalty},
             {"frequency_penalty", sampling->frequency_penalty}})
      if (value) cfg->sampling[key] = *value;
    if (sampling->top_k) cfg->sampling["top_k"] = *sampling->top_k;
    ServeBenchResult r = run_serve_bench(*cfg);
    nlohmann::json s = r.summary();
    std::fputs(format_summary(s).c_str(), stdout);
    if (!out->first.empty()) write_output_json(out->first, s);
    if (!out->second.empty()) plot_serve_bench(r, out->second);
    GS_CHECK(s["completed"].get<int>() > 0, "every request failed: {}", s.value("first_error", std::string()));
  });
}

}  // namespace gs
