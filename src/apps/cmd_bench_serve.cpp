// graphserve bench serve: the online-serving benchmark against any OpenAI-compatible server.
#include <cstdio>
#include <fstream>
#include <memory>

#include "apps/commands.h"
#include "core/error.h"
#include "server/serve_bench.h"

namespace gs {

void add_bench_serve(CLI::App& bench) {
  auto cfg = std::make_shared<ServeBenchConfig>();
  auto out = std::make_shared<std::pair<std::string, std::string>>();  // json, png
  auto* cmd = bench.add_subcommand("serve", "online serving benchmark against an OpenAI-compatible server");
  cmd->add_option("--base-url", cfg->base_url, "server URL")->capture_default_str();
  cmd->add_option("--model", cfg->model, "model name (default: the first of /v1/models)");
  cmd->add_option("--api-key", cfg->api_key, "bearer token")->envname("OPENAI_API_KEY");
  cmd->add_option("--dataset", cfg->dataset, "prompts file: JSONL with \"prompt\" or plain lines (default: random)");
  cmd->add_option("--input-len", cfg->input_len, "random prompt length in words (~tokens)")->capture_default_str();
  cmd->add_option("--output-len", cfg->output_len, "tokens to generate per request (ignore_eos)")->capture_default_str();
  cmd->add_option("--num-prompts", cfg->num_prompts, "requests to send")->capture_default_str();
  cmd->add_option("--request-rate", cfg->request_rate, "Poisson arrival rate, requests/s (inf: all at once)")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", cfg->max_concurrency, "most requests in flight (0: no bound)")->capture_default_str();
  cmd->add_option("--seed", cfg->seed, "seed of prompts and arrivals")->capture_default_str();
  cmd->add_option("--timeout", cfg->timeout_s, "seconds per request")->capture_default_str();
  cmd->add_option("--output-json", out->first, "write the results here");
  cmd->add_option("--plot", out->second, "write a PNG of TTFT and latency per request (gnuplot)");
  cmd->callback([cfg, out] {
    ServeBenchResult r = run_serve_bench(*cfg);
    nlohmann::json s = r.summary();
    std::fputs(format_summary(s).c_str(), stdout);
    if (!out->first.empty()) {
      std::ofstream f(out->first);
      GS_CHECK(f.good(), "--output-json: cannot write '{}'", out->first);
      f << s.dump(2) << "\n";
    }
    if (!out->second.empty()) plot_serve_bench(r, out->second);
    GS_CHECK(s["completed"].get<int>() > 0, "every request failed: {}", s.value("first_error", std::string()));
  });
}

}  // namespace gs
