// graphserve bench graphs (placeholder until the runner layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_bench_graphs(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("graphs", "(not built yet)");
  cmd->callback([] { fail("'graphs' is not implemented yet"); });
}
}  // namespace gs
