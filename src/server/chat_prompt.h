// Turns OpenAI chat messages into a prompt through the model's Jinja chat template.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "server/engine_client.h"

namespace gs {

// Checks `messages` (a non-empty list of {role, content} with string content or text parts)
// and returns them normalised to string content. Throws ApiError(400) naming the problem.
// Roles must be system, user, assistant, tool or developer.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

// The request's "tools": null when absent, else a list of objects (ApiError(400) otherwise).
nlohmann::ordered_json chat_tools(const nlohmann::ordered_json& body);

// The request's "chat_template_kwargs" (e.g. {"enable_thinking": false}): null when absent, else an
// object whose entries become template variables. ApiError(400) for a non-object, or for a name the
// server sets itself (messages, tools, documents, add_generation_prompt).
nlohmann::ordered_json chat_template_kwargs(const nlohmann::ordered_json& body);

// Parses `chat_template` now (start-up), so a broken template is an error there and not on every
// chat request; parsed templates are cached. Throws gs::Error naming the line and column.
void preparse_chat_template(const std::string& chat_template);

// Renders normalised messages with `chat_template`; throws ApiError(400) when the model has no
// template or rendering fails (the template's own message, e.g. from raise_exception).
// Ordered JSON keeps the client's key order, which tojson in templates prints. `template_kwargs`
// (from chat_template_kwargs) are extra variables, and override the special tokens' names.
std::string render_chat_prompt(const std::string& chat_template, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               const ServedModel& model, const nlohmann::ordered_json& template_kwargs = nullptr);

}  // namespace gs
