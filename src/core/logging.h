// Logging: spdlog, with the level set once from the CLI or $GRAPHSERVE_LOG_LEVEL.
#pragma once
#include <spdlog/spdlog.h>

#include <string_view>

namespace gs {
// Makes the default logger write to stderr and sets its level ("trace", "debug", "info", "warn", "error", "off").
void set_log_level(std::string_view level);
}  // namespace gs
