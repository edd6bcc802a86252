// graphserve serve (placeholder until the server layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "(not built yet)");
  cmd->callback([] { fail("'serve' is not implemented yet"); });
}
}  // namespace gs
