// Implements tokenizer/post_processor.h.
#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gs {

namespace {

// TemplateProcessing "single": SpecialToken items around one Sequence item.
PostProcessor from_template(const nlohmann::json& j, const std::string& file) {
  PostProcessor p;
  bool seen_sequence = false;
  for (const auto& item : j.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const auto& tokens = j.at("special_tokens");
    GS_CHECK(tokens.contains(name),
             "{}: TemplateProcessing uses special token '{}' that its "
             "special_tokens table does not define",
             file, name);
    for (const auto& id : tokens.at(name).at("ids")) (seen_sequence ? p.suffix : p.prefix).push_back(id.get<int32_t>());
  }
  return p;
}

}  // namespace

void PostProcessor::then(const PostProcessor& next) {
  prefix.insert(prefix.begin(), next.prefix.begin(), next.prefix.end());
  suffix.insert(suffix.end(), next.suffix.begin(), next.suffix.end());
}

PostProcessor PostProcessor::from_json(const nlohmann::json& j, const std::string& file) {
  PostProcessor p;
  if (j.is_null()) return p;
  const std::string type = j.value("type", "");
  if (type == "TemplateProcessing") return from_template(j, file);
  if (type == "ByteLevel") return p;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    p.prefix.push_back(j.at("cls").at(1).get<int32_t>());
    p.suffix.push_back(j.at("sep").at(1).get<int32_t>());
    return p;
  }
  if (type == "Sequence") {
    for (const auto& s : j.at("processors")) p.then(from_json(s, file));
    return p;
  }
  throw Unsupported(
      fmt::format("{}: unsupported post_processor type '{}' (supported: "
                  "TemplateProcessing, ByteLevel, RobertaProcessing, "
                  "BertProcessing, Sequence)",
                  file, type));
}

}  // namespace gs
