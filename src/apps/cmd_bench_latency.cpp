// graphserve bench latency (placeholder until the runner layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_bench_latency(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("latency", "(not built yet)");
  cmd->callback([] { fail("'latency' is not implemented yet"); });
}
}  // namespace gs
