// StopStringMatcher: finds stop strings in streamed text, even when one spans several tokens.
// Text that could still be the start of a stop string is held back until it is known not to
// be, so a stop string is never emitted, not even in part.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gs {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;                 // text that is final (safe to emit)
    std::optional<std::string> stop;  // the stop string found; `text` ends just before it
  };
  // Appends new text. After a stop string is found the matcher must not be fed again.
  Result feed(std::string_view text);
  // The held-back text, at the end of generation (it matched no stop string).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a proper prefix of some stop string
};

}  // namespace gs
