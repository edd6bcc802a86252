// graphserve bench graphs: decode latency per cudagraph mode x batch size, with capture cost.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/bench_model.h"
#include "apps/commands.h"
#include "apps/sampling_flags.h"
#include "bench/latency_bench.h"
#include "bench/run_program.h"
#include "core/error.h"
#include "core/logging.h"
#include "executor/executor.h"

namespace gs {

namespace {

struct GraphsArgs {
  EngineConfig cfg;
  std::vector<std::string> modes{"NONE", "PIECEWISE", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "FULL"};
  std::vector<int> batch_sizes{1, 8, 32, 128};
  LatencyBenchOptions bench{.batch_size = 1, .input_len = 32, .output_len = 32, .num_iters = 2};
  SamplingFlags sampling;
  std::string output_json = "bench_graphs.json";
  std::string output_png = "bench_graphs.png";
};

struct Cell {
  std::string mode;
  int batch_size = 0;
  LatencyResult r;
};

struct ModeRun {
  std::string mode;
  RunnerStats stats;
};

// gnuplot runs with an argument vector (no shell); the paths reach it as ARG1 (PNG) and ARG2 (data).
void plot(const GraphsArgs& a, const std::vector<Cell>& cells) {
  const std::string data = a.output_png + ".dat", script = a.output_png + ".gp";
  {
    std::ofstream d(data);
    for (const auto& m : a.modes) {
      d << "# " << m << "\n";
      for (const auto& c : cells)
        if (c.mode == m) d << c.batch_size << " " << c.r.decode_ms_median << "\n";
      d << "\n\n";
    }
  }
  std::ofstream g(script);
  g << "set terminal pngcairo noenhanced size 900,600\nset output ARG1\n"
    << "set title 'decode latency per step by cudagraph mode'\nset xlabel 'batch size'\n"
    << "set ylabel 'ms / decode step'\nset logscale x 2\nset key top left\nset grid\nplot ";
  for (size_t i = 0; i < a.modes.size(); ++i)  // modes are validated names
    g << (i ? ", " : "") << "ARG2 index " << i << " with linespoints title '" << a.modes[i] << "'";
  g << "\n";
  g.close();
  const int rc = run_program({"gnuplot", "-c", script, a.output_png, data});
  if (rc != 0)
    spdlog::warn("gnuplot failed with status {} (is it installed?); the data is in {}", rc, data);
  else
    fmt::print(stderr, "wrote {}\n", a.output_png);
}

void run(GraphsArgs& a) {
  finish_engine_options(a.cfg);
  GS_CHECK(!a.batch_sizes.empty() && !a.modes.empty(), "bench graphs: give at least one mode and batch size");
  for (const auto& m : a.modes) parse_cudagraph_mode(m);  // fail early on a typo
  a.cfg.max_num_seqs = std::max(a.cfg.max_num_seqs, *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end()));
  a.bench.max_num_batched_tokens = a.cfg.max_num_batched_tokens;
  a.bench.prefill_once = true;  // the table is of decode steps: one prefill per mode and batch size
  a.bench.sampling = a.sampling.over(LatencyBenchOptions::greedy());
  a.bench.sampling.validate(std::numeric_limits<int>::max());
  std::vector<Cell> cells;
  std::vector<ModeRun> runs;
  std::string device;
  for (const auto& m : a.modes) {
    EngineConfig cfg = a.cfg;
    cfg.enforce_eager = false;
    cfg.compilation.cudagraph_mode = parse_cudagraph_mode(m);
    auto exec = make_executor(cfg);
    Executor& runner = *exec;
    device = runner.device_name();
    runs.push_back({m, runner.stats()});
    for (int bs : a.batch_sizes) {
      LatencyBenchOptions o = a.bench;
      o.batch_size = bs;
      cells.push_back({m, bs, run_latency_bench(bench_model(runner), o)});
      spdlog::info("{} bs {}: {:.3f} ms / step", m, bs, cells.back().r.decode_ms_median);
    }
  }
  std::map<int, double> none_ms;
  for (const auto& c : cells)
    if (c.mode == "NONE") none_ms[c.batch_size] = c.r.decode_ms_median;

  fmt::print("device {}, model {}, input {}, output {}, sampling: {}\n", device,
             a.cfg.model.empty() ? a.cfg.preset : a.cfg.model, a.bench.input_len, a.bench.output_len,
             describe_sampling(a.bench.sampling));
  fmt::print("{:<20} {:>6} {:>12} {:>10} {:>10} {:>12} {:>8}\n", "mode", "batch", "decode ms", "p90 ms", "vs NONE",
             "capture s", "graphs");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& c : cells) {
    const RunnerStats& st = std::find_if(runs.begin(), runs.end(), [&](auto& r) { return r.mode == c.mode; })->stats;
    const double speedup = none_ms.count(c.batch_size) ? none_ms[c.batch_size] / c.r.decode_ms_median : 0.0;
    fmt::print("{:<20} {:>6} {:>12.3f} {:>10.3f} {:>9.2f}x {:>12.2f} {:>8}\n", c.mode, c.batch_size,
               c.r.decode_ms_median, c.r.decode_ms_p90, speedup, st.capture_seconds, st.num_graphs);
    rows.push_back({{"mode", c.mode},
                    {"resolved_mode", mode_name(st.resolved_mode)},
                    {"batch_size", c.batch_size},
                    {"decode_ms_median", c.r.decode_ms_median},
                    {"decode_ms_p90", c.r.decode_ms_p90},
                    {"prefill_ms", c.r.prefill_ms},
                    {"speedup_vs_none", speedup},
                    {"capture_seconds", st.capture_seconds},
                    {"graph_memory_bytes", st.graph_memory_bytes},
                    {"graph_memory_piecewise_bytes", st.graph_memory_piecewise_bytes},
                    {"graph_memory_full_bytes", st.graph_memory_full_bytes},
                    {"graph_memory_reserved_bytes", st.graph_memory_reserved_bytes},
                    {"num_graphs", st.num_graphs}});
  }
  for (const auto& r : runs)
    fmt::print(
        "{:<20} capture {:.2f} s, graph memory {:.1f} MiB (PIECEWISE {:.1f}, FULL {:.1f}; reserved {:.1f}), "
        "{} graphs\n",
        r.mode, r.stats.capture_seconds, double(r.stats.graph_memory_bytes) / (1 << 20),
        double(r.stats.graph_memory_piecewise_bytes) / (1 << 20), double(r.stats.graph_memory_full_bytes) / (1 << 20),
        double(r.stats.graph_memory_reserved_bytes) / (1 << 20), r.stats.num_graphs);
  if (!a.output_json.empty()) {
    nlohmann::json j = {{"device", device},
                        {"model", a.cfg.model.empty() ? a.cfg.preset : a.cfg.model},
                        {"sampling", describe_sampling(a.bench.sampling)},
                        {"input_len", a.bench.input_len},
                        {"output_len", a.bench.output_len},
                        {"results", rows}};
    write_output_json(a.output_json, j);
  }
  if (!a.output_png.empty()) plot(a, cells);
}

}  // namespace

void add_bench_graphs(CLI::App& bench) {
  auto args = std::make_shared<GraphsArgs>();
  auto* cmd = bench.add_subcommand("graphs", "Decode latency per cudagraph mode and batch size (table, JSON, PNG)");
  add_engine_options(*cmd, args->cfg);
  cmd->add_option("--modes", args->modes, "Modes to sweep (NONE first gives the speed-up column)")->delimiter(',');
  cmd->add_option("--batch-sizes", args->batch_sizes, "Batch sizes to sweep")->delimiter(',');
  cmd->add_option("--input-len", args->bench.input_len, "Prompt tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", args->bench.output_len, "Generated tokens per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", args->bench.num_iters, "Measured iterations")->check(CLI::PositiveNumber);
  add_sampling_flags(*cmd, args->sampling, "greedy");
  cmd->add_option("--output-json", args->output_json, "JSON results file ('' to skip)");
  cmd->add_option("--output-png", args->output_png, "PNG plot file ('' to skip)");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
