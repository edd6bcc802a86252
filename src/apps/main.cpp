// graphserve: serve | generate | bench | info
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/vllm_flags.h"
#include "core/error.h"
#include "core/logging.h"

#ifndef GS_VERSION
#define GS_VERSION "unknown"
#endif

namespace {

// Spellings vLLM users type that CLI11 cannot declare: `-cc '<json>'` (a multi-letter short
// option) becomes --compilation-config, and --log-level may follow the subcommand (it is moved
// before it). Returns the rewritten arguments, program name first.
std::vector<std::string> normalize_args(int argc, char** argv) {
  std::vector<std::string> in(argv + 1, argv + argc), global, rest;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a == "--log-level" && i + 1 < in.size()) {
      global.push_back(a);
      global.push_back(in[++i]);
    } else if (a.rfind("--log-level=", 0) == 0) {
      global.push_back(a);
    } else if (a == "-cc" || a == "--cc") {
      rest.push_back("--compilation-config");
    } else if (a.rfind("-cc=", 0) == 0 || a.rfind("--cc=", 0) == 0) {
      rest.push_back("--compilation-config=" + a.substr(a.find('=') + 1));
    } else {
      rest.push_back(a);
    }
  }
  std::vector<std::string> out = {argv[0]};
  out.insert(out.end(), global.begin(), global.end());
  rest = gs::normalize_vllm_args(std::move(rest));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graphserve: a native LLM inference engine and OpenAI-compatible server, fast through CUDA graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("graphserve ") + GS_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off (before or after the subcommand)")
      ->envname("GRAPHSERVE_LOG_LEVEL");
  // Subcommands do their work in their (final) callbacks, which run after this one.
  app.parse_complete_callback([&] { gs::set_log_level(log_level); });
  gs::add_serve_command(app);
  gs::add_generate_command(app);
  gs::add_info_command(app);
  gs::add_worker_command(app);
  CLI::App* bench = app.add_subcommand(
      "bench", "benchmarks: latency, throughput, graphs, serve, kernels, all-reduce, embed, structured, ops");
  bench->require_subcommand(1);
  gs::add_bench_latency(*bench);
  gs::add_bench_throughput(*bench);
  gs::add_bench_graphs(*bench);
  gs::add_bench_serve(*bench);
  gs::add_bench_kernels(*bench);
  gs::add_bench_all_reduce(*bench);
  gs::add_bench_embed(*bench);
  gs::add_bench_structured(*bench);
  gs::add_bench_ops(*bench);
  const std::vector<std::string> args = normalize_args(argc, argv);
  std::vector<const char*> cargs;
  for (const std::string& a : args) cargs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
