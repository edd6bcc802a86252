// Post-processors of tokenizer.json ("post_processor") reduced to what single-sequence encoding
// needs: the special token ids placed before and after the sequence when add_special_tokens.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gs {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;

  // Supported: TemplateProcessing, ByteLevel (no effect on ids), RobertaProcessing,
  // BertProcessing, Sequence; null adds nothing.
  static PostProcessor from_json(const nlohmann::json& j, const std::string& file);
  // Applies `next` after this one (a Sequence).
  void then(const PostProcessor& next);
};

}  // namespace gs
