// graphserve: serve | generate | bench | info
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "apps/commands.h"
#include "core/error.h"
#include "core/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"graphserve: a native LLM inference engine and OpenAI-compatible server, fast through CUDA graphs"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")->envname("GRAPHSERVE_LOG_LEVEL");
  // Subcommands do their work in their (final) callbacks, which run after this one.
  app.parse_complete_callback([&] { gs::set_log_level(log_level); });
  gs::add_serve_command(app);
  gs::add_generate_command(app);
  gs::add_info_command(app);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: latency, throughput, graphs, serve");
  bench->require_subcommand(1);
  gs::add_bench_latency(*bench);
  gs::add_bench_throughput(*bench);
  gs::add_bench_graphs(*bench);
  gs::add_bench_serve(*bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
