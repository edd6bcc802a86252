// graphserve generate (placeholder until the engine layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "(not built yet)");
  cmd->callback([] { fail("'generate' is not implemented yet"); });
}
}  // namespace gs
