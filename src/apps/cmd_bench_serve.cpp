// graphserve bench serve (placeholder until the server layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_bench_serve(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("serve", "(not built yet)");
  cmd->callback([] { fail("'serve' is not implemented yet"); });
}
}  // namespace gs
