// graphserve bench latency: prefill and per-step decode latency of the model runner alone.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/bench_model.h"
#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "bench/latency_bench.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/executor.h"

namespace gs {

namespace {

struct LatencyArgs {
  EngineConfig cfg;
  LatencyBenchOptions bench;
  SamplingFlags sampling;
  std::string output_json;
  std::vector<int> lora_spreads;  // one measurement per value (adapters per batch; 0: none)
};

// One latency line per --lora-spread value, in the same process (the same graphs).
void run_lora_spreads(LatencyArgs& a, Executor& runner) {
  for (int n : a.lora_spreads) {
    const int held = std::min(int(a.cfg.lora_modules.size()), a.cfg.lora_host_capacity());
    GS_CHECK(n >= 0 && n <= held,
             "--lora-spread {}: the runner holds {} of the {} --lora-modules (raise --max-cpu-loras to hold more)", n,
             held, a.cfg.lora_modules.size());
    a.bench.num_loras = n;
    const LatencyResult r = run_latency_bench(bench_model(runner), a.bench);
    fmt::print("lora spread {} (batch {}): decode / step {:.3f} ms median, {:.3f} ms p90, prefill {:.3f} ms\n", n,
               a.bench.batch_size, r.decode_ms_median, r.decode_ms_p90, r.prefill_ms);
  }
  const RunnerStats end = runner.stats();
  fmt::print("steps NONE {} PIECEWISE {} FULL {}, captures after start-up {}\n", end.steps_none, end.steps_piecewise,
             end.steps_full, end.graph_captures_after_startup);
}

void run(LatencyArgs& a) {
  finish_engine_options(a.cfg);
  a.bench.max_num_batched_tokens = a.cfg.max_num_batched_tokens;
  a.bench.num_speculative_tokens = a.cfg.speculative.enabled() ? a.cfg.speculative.num_speculative_tokens : 0;
  a.bench.sampling = a.sampling.over(LatencyBenchOptions::greedy());
  a.bench.sampling.validate(std::numeric_limits<int>::max());
  auto exec = make_executor(a.cfg);
  Executor& runner = *exec;
  const RunnerStats st = runner.stats();
  if (!a.lora_spreads.empty()) return run_lora_spreads(a, runner);
  const LatencyResult r = run_latency_bench(bench_model(runner), a.bench);
  fmt::print("device {}, model {}, cudagraph mode {}\n", runner.device_name(),
             a.cfg.model.empty() ? a.cfg.preset : a.cfg.model, mode_name(st.resolved_mode));
  fmt::print("batch {}, input {}, output {}, {} iterations, sampling: {}\n", a.bench.batch_size, a.bench.input_len,
             a.bench.output_len, a.bench.num_iters, describe_sampling(a.bench.sampling));
  if (a.bench.shared_prefix_len > 0)
    fmt::print(
        "every prompt starts with the same {} tokens, computed before the timer (a cached prefix); "
        "cascade attention steps: {}\n",
        a.bench.shared_prefix_len, runner.stats().steps_cascade);
  fmt::print("prefill:        {:10.3f} ms\n", r.prefill_ms);
  if (a.bench.num_speculative_tokens > 0)
    fmt::print("decode steps verify k = {} proposals per request (uniform batches of {} tokens)\n",
               a.bench.num_speculative_tokens, a.bench.batch_size * (1 + a.bench.num_speculative_tokens));
  fmt::print("decode / step:  {:10.3f} ms median, {:.3f} ms p90\n", r.decode_ms_median, r.decode_ms_p90);
  fmt::print("device-to-host: {:10.0f} bytes per decode step\n", r.d2h_bytes_per_step);
  fmt::print("graphs: {} captured in {:.2f} s, {:.1f} MiB\n", st.num_graphs, st.capture_seconds,
             double(st.graph_memory_bytes) / (1 << 20));
  if (a.output_json.empty()) return;
  const RunnerStats end = runner.stats();
  nlohmann::json j = {
      {"device", runner.device_name()},
      {"model", a.cfg.model.empty() ? a.cfg.preset : a.cfg.model},
      {"cudagraph_mode", mode_name(st.resolved_mode)},
      {"batch_size", a.bench.batch_size},
      {"input_len", a.bench.input_len},
      {"shared_prefix_len", a.bench.shared_prefix_len},
      {"output_len", a.bench.output_len},
      {"num_iters", a.bench.num_iters},
      {"sampling", describe_sampling(a.bench.sampling)},
      {"d2h_bytes_per_step", r.d2h_bytes_per_step},
      {"prefill_ms", r.prefill_ms},
      {"decode_ms_median", r.decode_ms_median},
      {"decode_ms_p90", r.decode_ms_p90},
      {"decode_ms", r.decode_ms},
      {"num_graphs", st.num_graphs},
      {"capture_seconds", st.capture_seconds},
      {"graph_memory_bytes", st.graph_memory_bytes},
      {"steps", {{"NONE", end.steps_none}, {"PIECEWISE", end.steps_piecewise}, {"FULL", end.steps_full}}},
      {"cascade_steps", end.steps_cascade},
      {"padded_tokens", end.padded_tokens},
      {"graph_captures_after_startup", end.graph_captures_after_startup},
  };
  write_output_json(a.output_json, j);
}

}  // namespace

void add_bench_latency(CLI::App& bench) {
  auto args = std::make_shared<LatencyArgs>();
  auto* cmd = bench.add_subcommand("latency", "Prefill and per-step decode latency of the model runner");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--batch-size", args->bench.batch_size, "Sequences per batch")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", args->bench.input_len, "Prompt tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", args->bench.output_len, "Generated tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--shared-prefix-len", args->bench.shared_prefix_len,
                  "Tokens every prompt starts with, in shared KV blocks computed before the timer (a cached "
                  "system prompt; a multiple of --block-size); --input-len tokens of each prompt follow")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-iters", args->bench.num_iters, "Measured iterations")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters-warmup", args->bench.num_warmup_iters, "Unmeasured iterations first")
      ->check(CLI::NonNegativeNumber);
  add_sampling_flags(*cmd, args->sampling, "greedy");
  cmd->add_option("--lora-spread", args->lora_spreads,
                  "with --enable-lora: measure with requests spread over the first N adapters (0: base model); "
                  "several values measure in turn");
  cmd->add_option("--output-json", args->output_json, "Write the results as JSON to this file");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
