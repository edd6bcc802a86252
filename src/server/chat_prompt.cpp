// Implements server/chat_prompt.h.
#include "server/chat_prompt.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "server/api_error.h"

#if __has_include("tokenizer/chat_template.h")
#include "tokenizer/chat_template.h"
#define GS_HAVE_CHAT_TEMPLATE 1
#endif

namespace gs {

using json = nlohmann::ordered_json;

namespace {

// OpenAI content: a string, null, or a list of parts of which only text parts are supported.
std::string content_text(const json& content, size_t i) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_param("messages", fmt::format("messages[{}].content must be a string or a list of parts", i));
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad_param("messages", fmt::format("messages[{}].content: only parts of type \"text\" with a "
                                        "string \"text\" are supported",
                                        i));
    text += part["text"].get<std::string>();
  }
  return text;
}

#ifdef GS_HAVE_CHAT_TEMPLATE
// Templates parsed once per source text (a server has one or two); rendering is const.
std::shared_ptr<const ChatTemplate> parsed(const std::string& source) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const ChatTemplate>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(source);
  if (it != cache.end()) return it->second;
  auto t = std::make_shared<const ChatTemplate>(source);
  if (cache.size() >= 8) cache.clear();
  cache.emplace(source, t);
  return t;
}
#endif

}  // namespace

void preparse_chat_template(const std::string& chat_template) {
#ifdef GS_HAVE_CHAT_TEMPLATE
  if (chat_template.empty()) return;
  try {
    parsed(chat_template);
  } catch (const Error& e) {
    throw Error(std::string("the chat template does not parse: ") + e.what());
  }
#else
  (void)chat_template;
#endif
}

json normalize_chat_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    bad_param("messages", "'messages' must be a non-empty list of {role, content} objects");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_param("messages", fmt::format("messages[{}] must be an object with a string 'role'", i));
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      bad_param("messages", fmt::format("messages[{}].role is '{}'; it must be one of system, user, assistant, "
                                        "tool, developer",
                                        i, role));
    json msg = m;  // keep extra keys (name, tool_calls, tool_call_id) for templates that use them
    msg["content"] = content_text(m.value("content", json()), i);
    out.push_back(std::move(msg));
  }
  return out;
}

json chat_tools(const json& body) {
  if (!body.is_object() || !body.contains("tools") || body["tools"].is_null()) return json();
  const json& tools = body["tools"];
  if (!tools.is_array()) bad_param("tools", "'tools' must be a list of tool objects");
  for (size_t i = 0; i < tools.size(); ++i)
    if (!tools[i].is_object()) bad_param("tools", fmt::format("tools[{}] must be an object", i));
  return tools;
}

json chat_template_kwargs(const json& body) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_object())
    bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object of template variables");
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"})
    if (it->contains(reserved))
      bad_param("chat_template_kwargs",
                fmt::format("chat_template_kwargs may not set '{}' (the request's own field sets it)", reserved));
  return *it;
}

std::string render_chat_prompt(const std::string& chat_template, const json& messages, const json& tools,
                               bool add_generation_prompt, const ServedModel& model, const json& template_kwargs) {
  if (chat_template.empty())
    throw ApiError(400,
                   fmt::format("model '{}' has no chat template (no chat_template in its "
                               "tokenizer_config.json); use /v1/completions, or start the "
                               "server with --chat-template FILE",
                               model.name),
                   "messages", "invalid_request_error", "no_chat_template");
#ifdef GS_HAVE_CHAT_TEMPLATE
  nlohmann::ordered_json special = {{"bos_token", model.bos_token},
                                    {"eos_token", model.eos_token},
                                    {"unk_token", model.unk_token},
                                    {"pad_token", model.pad_token}};
  if (template_kwargs.is_object())
    for (const auto& [name, value] : template_kwargs.items()) special[name] = value;
  try {
    return parsed(chat_template)->render(messages, tools, add_generation_prompt, special);
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "messages");
  }
#else
  (void)messages, (void)tools, (void)add_generation_prompt, (void)template_kwargs;
  throw ApiError(400, "chat templates are not supported by this build", "messages");
#endif
}

}  // namespace gs
