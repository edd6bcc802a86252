// Implements cudagraph/batch_descriptor.h (BatchDescriptor).
#include "cudagraph/batch_descriptor.h"

#include <fmt/format.h>

namespace gs {

std::string BatchDescriptor::str() const {
  return fmt::format("BatchDescriptor(num_tokens={}, num_reqs={}, uniform={}, has_lora={}, q={})", num_tokens,
                     num_reqs == 0 ? std::string("any") : std::to_string(num_reqs), uniform, has_lora,
                     uniform_query_len);
}

}  // namespace gs
