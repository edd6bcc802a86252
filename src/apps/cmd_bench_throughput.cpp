// graphserve bench throughput (placeholder until the engine layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_bench_throughput(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("throughput", "(not built yet)");
  cmd->callback([] { fail("'throughput' is not implemented yet"); });
}
}  // namespace gs
