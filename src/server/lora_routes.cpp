// POST /v1/load_lora_adapter and /v1/unload_lora_adapter, as vLLM has them: a JSON body
// {"lora_name", "lora_path"} (unload needs the name alone); 200 with a plain-text "Success: ..."
// line, else an OpenAI error object. Both exist only when runtime updating is allowed
// (server/lora_policy.h): else 404 as for any unknown route, before the body is read. 400 for
// missing fields, an invalid name, a name already served, LoRA not enabled, or a path that is not
// a loadable adapter inside the LoRA directories (one sentence for every such reason; the log
// has the detail); 403 for an adapter of --lora-modules; 404 for an unknown name to unload.
#include <fmt/format.h>

#include <algorithm>

#include "core/logging.h"
#include "server/api_error.h"
#include "server/api_server.h"
#include "server/json_body.h"
#include "server/lora_policy.h"

namespace gs {

namespace {

// body[key] as a non-empty string, else "".
std::string string_field(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

HttpResponse ApiServer::handle_lora_adapter(const HttpRequest& req) {
  if (!cfg_.lora.allow_runtime_updating) return error(404, fmt::format("no route for {} {}", req.method, req.path));
  const bool load = req.path == "/v1/load_lora_adapter";
  try {
    if (!client_.model().lora_enabled)
      throw ApiError(400, "LoRA is not enabled: start the server with --enable-lora to load adapters");
    const nlohmann::json body = parse_json_body(req.body, cfg_.max_json_depth);
    if (!body.is_object()) throw ApiError(400, "the body must be a JSON object {\"lora_name\", \"lora_path\"}");
    const std::string name = string_field(body, "lora_name"), path = string_field(body, "lora_path");
    if (load && (name.empty() || path.empty()))
      throw ApiError(400, "Both 'lora_name' and 'lora_path' must be provided.",
                     name.empty() ? "lora_name" : "lora_path");
    if (name.empty()) throw ApiError(400, "'lora_name' needs to be provided to unload a LoRA adapter.", "lora_name");
    check_model_name(name, "lora_name");
    if (std::find(startup_loras_.begin(), startup_loras_.end(), name) != startup_loras_.end())
      throw ApiError(
          403,
          fmt::format("LoRA adapter '{}' was loaded at start-up (--lora-modules): it cannot be {} over the API", name,
                      load ? "replaced" : "unloaded"),
          "lora_name", "permission_error");
    std::string message;
    if (load) {
      std::string why;
      const auto dir = resolve_adapter_dir(path, cfg_.lora.roots, why);
      if (!dir) {
        spdlog::warn("refused to load LoRA adapter '{}' from '{}': {}", name, log_safe(path), why);
        refuse_lora_path(name);
      }
      client_.load_lora(name, dir->string());
      message = fmt::format("Success: LoRA adapter '{}' added successfully.", name);
    } else {
      client_.unload_lora(name);
      message = fmt::format("Success: LoRA adapter '{}' removed successfully.", name);
    }
    return HttpResponse{200, "text/plain; charset=utf-8", message, {}};
  } catch (const ApiError& e) {
    const auto replace = nlohmann::json::error_handler_t::replace;
    return HttpResponse{e.status(), "application/json", e.to_json().dump(-1, ' ', false, replace), {}};
  }
}

}  // namespace gs
