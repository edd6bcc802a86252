// Implements tokenizer/chat_template.h.
#include "tokenizer/chat_template.h"

#include "core/error.h"
#include "tokenizer/jinja/template.h"

namespace gs {

ChatTemplate::ChatTemplate(const std::string& source) : tmpl_(std::make_unique<const jinja::Template>(source)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& special) const {
  GS_CHECK(messages.is_array(), "chat messages must be a JSON array, got {}", messages.type_name());
  GS_CHECK(special.is_null() || special.is_object(), "special tokens must be a JSON object, got {}",
           special.type_name());
  // The variables HF passes: messages, tools and documents (none when absent),
  // add_generation_prompt, and the special tokens that are set.
  jinja::Dict vars = {
      {"messages", jinja::Value::from_json(messages)},
      {"tools", tools.is_null() ? jinja::Value(nullptr) : jinja::Value::from_json(tools)},
      {"documents", jinja::Value(nullptr)},
      {"add_generation_prompt", jinja::Value(add_generation_prompt)},
  };
  if (special.is_object()) {
    for (const auto& [name, value] : special.items())
      if (!value.is_null()) vars.emplace_back(name, jinja::Value::from_json(value));
  }
  return tmpl_->render(vars);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& tools,
                                 bool add_generation_prompt, const nlohmann::json& special) const {
  return render(nlohmann::ordered_json(messages), nlohmann::ordered_json(tools), add_generation_prompt,
                nlohmann::ordered_json(special));
}

}  // namespace gs
