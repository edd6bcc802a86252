// graphserve bench kernels: where one decode step's GPU time goes, kernel by kernel, from the
// device's own records (CUPTI), for each batch size, with the step's busy time and idle gaps; with
// --prefill, where the prompts' whole prefill goes (every chunk of it, one "step").
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "apps/bench_model.h"
#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "bench/kernel_breakdown.h"
#include "bench/latency_bench.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/executor.h"
#include "executor/worker.h"

namespace gs {

namespace {

struct KernelsArgs {
  EngineConfig cfg;
  std::vector<int> batch_sizes{1, 32, 128};
  LatencyBenchOptions bench{.batch_size = 1, .input_len = 128, .output_len = 17, .num_iters = 1};
  SamplingFlags sampling;
  int top = 20;
  bool prefill = false;
  std::string output_json;
};

nlohmann::json to_json(const KernelBreakdown& b, int batch_size) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : b.rows)
    rows.push_back({{"kernel", r.kernel},
                    {"calls_per_step", r.calls_per_step},
                    {"us_per_step", r.us_per_step},
                    {"us_per_call", r.us_per_call},
                    {"share", r.share}});
  return {{"batch_size", batch_size},
          {"steps", b.steps},
          {"wall_ms_per_step", b.wall_ms_per_step},
          {"kernel_ms_per_step", b.kernel_ms_per_step},
          {"busy_ms_per_step", b.busy_ms_per_step},
          {"kernels", rows}};
}

// Tensor parallelism: rank 0's worker records its decode steps' kernels and writes the tables
// when the executor shuts it down (executor/worker.h kWorkerKernelProfileEnv); printed here. No JSON.
void run_tensor_parallel(KernelsArgs& a) {
  GS_CHECK(a.output_json.empty(), "bench kernels: --output-json is not written with --tensor-parallel-size > 1");
  const std::string path =
      fmt::format("{}/graphserve-kernels-{}.txt", std::filesystem::temp_directory_path().string(), getpid());
  setenv(kWorkerKernelProfileEnv, path.c_str(), 1);
  setenv(kWorkerKernelProfileTopEnv, std::to_string(a.top).c_str(), 1);
  {
    auto exec = make_executor(a.cfg);
    fmt::print("device {}, model {}, cudagraph mode {}, input {}, sampling: {}; kernels of rank 0 of {}\n",
               exec->device_name(), a.cfg.model.empty() ? a.cfg.preset : a.cfg.model,
               mode_name(exec->stats().resolved_mode), a.bench.input_len, describe_sampling(a.bench.sampling),
               a.cfg.tensor_parallel_size);
    for (int bs : a.batch_sizes) {
      LatencyBenchOptions o = a.bench;
      o.batch_size = bs;
      run_latency_bench(bench_model(*exec), o);
    }
  }  // the workers write the profile as they shut down
  unsetenv(kWorkerKernelProfileEnv);
  std::ifstream f(path);
  GS_CHECK(f, "bench kernels: rank 0 wrote no kernel profile to {} (its log says why)", path);
  fmt::print("{}", std::string(std::istreambuf_iterator<char>(f), {}));
  std::filesystem::remove(path);
}

void run(KernelsArgs& a) {
  finish_engine_options(a.cfg);
  GS_CHECK(!a.batch_sizes.empty(), "bench kernels: give at least one batch size");
  GS_CHECK(a.prefill || a.bench.output_len >= 2, "bench kernels: --output-len must be >= 2 (one decode step), got {}",
           a.bench.output_len);
  GS_CHECK(!a.prefill || a.cfg.tensor_parallel_size == 1,
           "bench kernels: --prefill profiles one GPU (--tensor-parallel-size 1), got {}", a.cfg.tensor_parallel_size);
  a.cfg.max_num_seqs = std::max(a.cfg.max_num_seqs, *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end()));
  GS_CHECK(a.bench.num_loras <= std::min(int(a.cfg.lora_modules.size()), a.cfg.lora_host_capacity()),
           "--lora-spread {}: the runner holds {} of the {} --lora-modules (raise --max-cpu-loras to hold more)",
           a.bench.num_loras, std::min(int(a.cfg.lora_modules.size()), a.cfg.lora_host_capacity()),
           a.cfg.lora_modules.size());
  a.bench.max_num_batched_tokens = a.cfg.max_num_batched_tokens;
  a.cfg.kernel_options.decode.trace_phases = true;  // the persistent kernel's phases, logged at the end
  a.bench.sampling = a.sampling.over(LatencyBenchOptions::greedy());
  a.bench.sampling.validate(std::numeric_limits<int>::max());
  if (a.cfg.tensor_parallel_size > 1) return run_tensor_parallel(a);
  std::string why_not;
  auto profiler = make_kernel_profiler(&why_not);
  GS_CHECK(profiler, "bench kernels: no kernel profiler: {}", why_not);
  auto exec = make_runner_executor(a.cfg);
  GS_CHECK(exec->device_name().rfind("cuda", 0) == 0,
           "bench kernels profiles GPU kernels, but the model runs on {}; run it on a machine with a CUDA GPU",
           exec->device_name());
  fmt::print(
      "device {}, model {}, cudagraph mode {}, input {}, sampling: {}{}\n", exec->device_name(),
      a.cfg.model.empty() ? a.cfg.preset : a.cfg.model, mode_name(exec->stats().resolved_mode), a.bench.input_len,
      describe_sampling(a.bench.sampling),
      a.prefill ? fmt::format("; the prefill (chunks of {} tokens) is the step", a.bench.max_num_batched_tokens) : "");
  fmt::print(
      "own us: what a kernel adds past the kernels started before it (kernels overlap under programmatic "
      "dependent launch), per step; us/call: its whole duration; wall: inflated by profiling\n");
  nlohmann::json results = nlohmann::json::array();
  for (int bs : a.batch_sizes) {
    LatencyBenchOptions o = a.bench;
    o.batch_size = bs;
    std::vector<KernelRecord> records;
    auto& begin = a.prefill ? o.on_prefill_begin : o.on_decode_begin;
    auto& end = a.prefill ? o.on_prefill_end : o.on_decode_end;
    begin = [&] { profiler->start(); };
    end = [&] { records = profiler->stop(); };
    if (a.prefill) o.output_len = 1, o.num_iters = 1;
    const LatencyResult r = run_latency_bench(bench_model(*exec), o);
    const double wall = a.prefill ? r.prefill_ms : std::accumulate(r.decode_ms.begin(), r.decode_ms.end(), 0.0);
    const KernelBreakdown b = summarize_kernels(records, a.prefill ? 1 : int(r.decode_ms.size()), wall);
    fmt::print("{}", format_kernel_breakdown(b, bs, a.top));
    results.push_back(to_json(b, bs));
  }
  if (!a.output_json.empty())
    write_output_json(a.output_json, {{"device", exec->device_name()},
                                      {"model", a.cfg.model.empty() ? a.cfg.preset : a.cfg.model},
                                      {"sampling", describe_sampling(a.bench.sampling)},
                                      {"input_len", a.bench.input_len},
                                      {"results", results}});
}

}  // namespace

void add_bench_kernels(CLI::App& bench) {
  auto args = std::make_shared<KernelsArgs>();
  auto* cmd = bench.add_subcommand("kernels", "Per-kernel GPU time of decode steps (CUPTI), per batch size");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--batch-sizes", args->batch_sizes, "Batch sizes to profile")->delimiter(',');
  cmd->add_option("--input-len", args->bench.input_len, "Prompt tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", args->bench.output_len, "Generated tokens per sequence (profiled steps + 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lora-spread", args->bench.num_loras,
                  "with --enable-lora: requests spread over the first N adapters (0: the base model)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top", args->top, "Kernels listed per batch size (the rest summed)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--prefill", args->prefill,
                "profile the prefill of the batch's prompts (--input-len tokens each, in chunks of "
                "--max-num-batched-tokens) instead of its decode steps");
  add_sampling_flags(*cmd, args->sampling, "greedy");
  cmd->add_option("--output-json", args->output_json, "JSON results file");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
