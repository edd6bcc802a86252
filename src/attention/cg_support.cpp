// Implements attention/cg_support.h (AttentionCGSupport).
#include "attention/cg_support.h"

namespace gs {

std::string_view cg_support_name(AttentionCGSupport s) {
  switch (s) {
    case AttentionCGSupport::NEVER: return "NEVER";
    case AttentionCGSupport::UNIFORM_SINGLE_TOKEN_DECODE: return "UNIFORM_SINGLE_TOKEN_DECODE";
    case AttentionCGSupport::UNIFORM_BATCH: return "UNIFORM_BATCH";
    case AttentionCGSupport::ALWAYS: return "ALWAYS";
  }
  return "?";
}

}  // namespace gs
