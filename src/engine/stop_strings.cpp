// Implements engine/stop_strings.h (StopStringMatcher).
#include "engine/stop_strings.h"

#include <algorithm>

namespace gs {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

StopStringMatcher::Result StopStringMatcher::feed(std::string_view text) {
  Result res;
  pending_.append(text);
  if (stops_.empty()) {
    res.text = std::move(pending_);
    pending_.clear();
    return res;
  }
  // Earliest occurrence of any stop string (the first listed wins at the same position).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    size_t pos = pending_.find(s);
    if (pos < best) {
      best = pos;
      res.stop = s;
    }
  }
  if (best != std::string::npos) {
    res.text = pending_.substr(0, best);
    pending_.clear();
    return res;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  }
  res.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return res;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace gs
