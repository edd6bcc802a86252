// Implements spec/ngram_proposer.h (NgramProposer).
#include "spec/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace gs {

namespace {

// The start of the most recent earlier occurrence of the last n tokens, or -1.
long find_previous(std::span<const int32_t> t, size_t n) {
  const size_t len = t.size();
  const auto suffix = t.subspan(len - n);
  for (long start = long(len - n) - 1; start >= 0; --start)
    if (std::equal(suffix.begin(), suffix.end(), t.begin() + start)) return start;
  return -1;
}

}  // namespace

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  GS_CHECK(min_n >= 1 && min_n <= max_n, "n-gram proposer needs 1 <= prompt_lookup_min <= prompt_lookup_max, got {} {}",
           min_n, max_n);
}

std::vector<int32_t> NgramProposer::propose(std::span<const int32_t> tokens, int k) const {
  std::vector<int32_t> out;
  if (k <= 0) return out;
  const size_t len = tokens.size();
  for (size_t n = std::min<size_t>(size_t(max_n_), len > 0 ? len - 1 : 0); n >= size_t(min_n_); --n) {
    const long start = find_previous(tokens, n);
    if (start < 0) continue;
    // Token i of the continuation is the one after position start + n + i of tokens + out.
    const size_t from = size_t(start) + n;
    for (int i = 0; i < k; ++i) {
      const size_t p = from + size_t(i);
      out.push_back(p < len ? tokens[p] : out[p - len]);
    }
    return out;
  }
  return out;
}

}  // namespace gs
