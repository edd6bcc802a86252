// The small routes vLLM serves beside the OpenAI API: GET /version ({"version"}), GET and POST
// /ping (the health check under SageMaker's name), GET /v1/models/{id} (one model card, 404 for
// a name not served) and GET /v1/responses/{id} (a stored response).
#include <fmt/format.h>

#include <string_view>

#include "server/api_error.h"
#include "server/api_server.h"

namespace gs {

std::optional<HttpResponse> ApiServer::info_route(const HttpRequest& req) {
  const std::string& p = req.path;
  if (p == "/ping" && (req.method == "GET" || req.method == "POST"))
    return route(HttpRequest{"GET", "/health", req.authorization, ""});
  if (req.method != "GET") return std::nullopt;
  if (p == "/version")
    return HttpResponse{200, "application/json", nlohmann::json{{"version", cfg_.version}}.dump(), {}};
  constexpr std::string_view kModel = "/v1/models/", kResponse = "/v1/responses/";
  if (p.rfind(kModel, 0) == 0 && p.size() > kModel.size()) {
    const std::string id = p.substr(kModel.size());
    const HttpResponse all = route(HttpRequest{"GET", "/v1/models", req.authorization, ""});
    const nlohmann::json cards = nlohmann::json::parse(all.body);
    for (const nlohmann::json& card : cards["data"])
      if (card["id"] == id) return HttpResponse{200, "application/json", card.dump(), {}};
    throw ApiError::model_not_found(id);
  }
  if (p.rfind(kResponse, 0) == 0 && p.size() > kResponse.size()) {
    const std::string id = p.substr(kResponse.size());
    if (auto entry = responses_->get(id))
      return HttpResponse{
          200, "application/json", entry->response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
    throw ApiError(404, fmt::format("Response with id '{}' not found", id), "response_id", "not_found_error");
  }
  return std::nullopt;
}

}  // namespace gs
