// graphserve info (placeholder until the model layer provides it)
#include "apps/commands.h"
#include "core/error.h"

namespace gs {
void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "(not built yet)");
  cmd->callback([] { fail("'info' is not implemented yet"); });
}
}  // namespace gs
