// graphserve bench latency: prefill and per-step decode latency of the model runner alone.
#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "core/logging.h"
#include "runner/latency_bench.h"

namespace gs {

namespace {

struct LatencyArgs {
  EngineConfig cfg;
  LatencyBenchOptions bench;
  SamplingFlags sampling;
  std::string output_json;
};

void run(LatencyArgs& a) {
  finish_engine_options(a.cfg);
  a.bench.max_num_batched_tokens = a.cfg.max_num_batched_tokens;
  a.bench.sampling = a.sampling.over(LatencyBenchOptions::greedy());
  a.bench.sampling.validate(std::numeric_limits<int>::max());
  ModelRunner runner(a.cfg);
  const RunnerStats st = runner.stats();
  const LatencyResult r = run_latency_bench(runner, a.bench);
  fmt::print("device {}, model {}, cudagraph mode {}\n", runner.device_name(),
             a.cfg.model.empty() ? a.cfg.preset : a.cfg.model, mode_name(st.resolved_mode));
  fmt::print("batch {}, input {}, output {}, {} iterations, sampling: {}\n", a.bench.batch_size, a.bench.input_len,
             a.bench.output_len, a.bench.num_iters, describe_sampling(a.bench.sampling));
  fmt::print("prefill:        {:10.3f} ms\n", r.prefill_ms);
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
      {"padded_tokens", end.padded_tokens},
      {"graph_captures_after_startup", end.graph_captures_after_startup},
  };
  std::ofstream(a.output_json) << j.dump(2) << "\n";
  fmt::print("wrote {}\n", a.output_json);
}

}  // namespace

void add_bench_latency(CLI::App& bench) {
  auto args = std::make_shared<LatencyArgs>();
  auto* cmd = bench.add_subcommand("latency", "Prefill and per-step decode latency of the model runner");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--batch-size", args->bench.batch_size, "Sequences per batch")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", args->bench.input_len, "Prompt tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", args->bench.output_len, "Generated tokens per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", args->bench.num_iters, "Measured iterations")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters-warmup", args->bench.num_warmup_iters, "Unmeasured iterations first")
      ->check(CLI::NonNegativeNumber);
  add_sampling_flags(*cmd, args->sampling, "greedy");
  cmd->add_option("--output-json", args->output_json, "Write the results as JSON to this file");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
