#include "core/logging.h"

#include "core/error.h"

namespace gs {
void set_log_level(std::string_view level) {
  const auto l = spdlog::level::from_str(std::string(level));
  GS_CHECK(l != spdlog::level::off || level == "off",
           "unknown log level '{}' (valid: trace, debug, info, warn, error, off)", level);
  spdlog::set_level(l);
}
}  // namespace gs
