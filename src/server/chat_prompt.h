// Turns OpenAI chat messages into a prompt through the model's Jinja chat template.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "server/engine_client.h"

namespace gs {

// Checks `messages` (a non-empty list of {role, content} with string content or text parts)
// and returns them normalised to string content. Throws ApiError(400) naming the problem.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

// Renders normalised messages with `chat_template`; throws ApiError(400) when the model has no
// template or rendering fails (the template's own message, e.g. from raise_exception).
// Ordered JSON keeps the client's key order, which tojson in templates prints.
std::string render_chat_prompt(const std::string& chat_template,
                               const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               const ServedModel& model);

}  // namespace gs
