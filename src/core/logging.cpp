// Implements core/logging.h (Logging).
#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace gs {
void set_log_level(std::string_view level) {
  const auto l = spdlog::level::from_str(std::string(level));
  GS_CHECK(l != spdlog::level::off || level == "off",
           "unknown log level '{}' (valid: trace, debug, info, warn, error, off)", level);
  // Logs go to stderr: stdout carries only what a command produces (text, tables, JSON).
  if (spdlog::default_logger()->name() != "stderr") spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");  // no logger name: there is one logger
  spdlog::set_level(l);
}
}  // namespace gs
