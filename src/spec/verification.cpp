// Implements spec/verification.h.
#include "spec/verification.h"

#include "core/error.h"

namespace gs {

int num_accepted_tokens(std::span<const int32_t> sampled, std::span<const int32_t> proposed) {
  GS_CHECK(sampled.size() == proposed.size() + 1, "verification needs 1 + {} sampled rows, got {}", proposed.size(),
           sampled.size());
  size_t a = 0;
  while (a < proposed.size() && sampled[a] == proposed[a]) ++a;
  return static_cast<int>(a);
}

}  // namespace gs
