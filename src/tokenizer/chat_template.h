// A model's chat template (the Jinja `chat_template` of tokenizer_config.json), rendered the way
// HF transformers' apply_chat_template does (Jinja2 sandbox, trim_blocks, lstrip_blocks,
// loop controls, raise_exception, non-escaping tojson) by the engine in tokenizer/jinja/.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace gs {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses once; throws gs::Error naming line and column on syntax errors.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders `messages` (OpenAI-style array of {role, content, ...}) with `tools` (null: none)
  // and `special` ({bos_token, eos_token, unk_token, pad_token}; a missing or null one is
  // undefined, as in HF). Object key order is kept (tojson and items() print it), which is why
  // these take ordered_json; parse requests with nlohmann::ordered_json::parse. Throws gs::Error
  // with the template's own message for raise_exception, or a located message for other errors.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& special) const;
  // Convenience for nlohmann::json inputs: objects lose their original key order (sorted).
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                     const nlohmann::json& special) const;

 private:
  std::unique_ptr<const jinja::Template> tmpl_;
};

}  // namespace gs
