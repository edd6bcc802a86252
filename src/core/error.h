// Errors: one exception type whose message tells the user what to fix.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace gs {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when a feature or configuration is valid but not supported by this build or device.
class Unsupported : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gs

// GS_CHECK(cond, "fmt", args...): throws gs::Error with the formatted message when cond is false.
#define GS_CHECK(cond, ...)               \
  do {                                    \
    if (!(cond)) ::gs::fail(__VA_ARGS__); \
  } while (0)
