// NgramProposer: prompt-lookup speculation on the host (vLLM's "ngram" method). The longest
// suffix of a request's tokens (prompt_lookup_max down to prompt_lookup_min tokens) that also
// occurs earlier is looked up, most recent occurrence first, and the tokens that followed it
// are proposed. The continuation may run into the suffix itself: it then repeats with the
// match's period, so a match always yields k tokens. No model, no device work.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace gs {

class NgramProposer {
 public:
  // 1 <= min_n <= max_n.
  NgramProposer(int min_n, int max_n);

  // Up to k proposed tokens following `tokens`; empty when no suffix of min_n..max_n tokens
  // occurs earlier (or k <= 0).
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int k) const;

 private:
  int min_n_, max_n_;
};

}  // namespace gs
