// POST /v1/load_lora_adapter and /v1/unload_lora_adapter, as vLLM has them: a JSON body
// {"lora_name", "lora_path"} (unload needs the name alone); 200 with a plain-text "Success: ..."
// line, else an OpenAI error object: 400 for missing fields, a name already served, a malformed
// adapter or LoRA not enabled; 404 for a path with no adapter or an unknown name.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/api_server.h"
#include "server/json_body.h"

namespace gs {

namespace {

// body[key] as a non-empty string, else "".
std::string string_field(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

HttpResponse ApiServer::handle_lora_adapter(const HttpRequest& req) {
  const bool load = req.path == "/v1/load_lora_adapter";
  try {
    const nlohmann::json body = parse_json_body(req.body, cfg_.max_json_depth);
    if (!body.is_object()) throw ApiError(400, "the body must be a JSON object {\"lora_name\", \"lora_path\"}");
    const std::string name = string_field(body, "lora_name"), path = string_field(body, "lora_path");
    std::string message;
    if (load) {
      if (name.empty() || path.empty())
        throw ApiError(400, "Both 'lora_name' and 'lora_path' must be provided.",
                       name.empty() ? "lora_name" : "lora_path");
      client_.load_lora(name, path);
      message = fmt::format("Success: LoRA adapter '{}' added successfully.", name);
    } else {
      if (name.empty()) throw ApiError(400, "'lora_name' needs to be provided to unload a LoRA adapter.", "lora_name");
      client_.unload_lora(name);
      message = fmt::format("Success: LoRA adapter '{}' removed successfully.", name);
    }
    return HttpResponse{200, "text/plain; charset=utf-8", message, {}};
  } catch (const ApiError& e) {
    const auto replace = nlohmann::json::error_handler_t::replace;  // a path's invalid UTF-8 stays printable
    return HttpResponse{e.status(), "application/json", e.to_json().dump(-1, ' ', false, replace), {}};
  }
}

}  // namespace gs
