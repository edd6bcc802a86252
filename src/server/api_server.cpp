// ApiServer: routes /v1/completions, /v1/chat/completions, /tokenize, /detokenize (POST) and /health, /metrics,
// /v1/models (GET) to their handlers, behind one error ladder (ApiError: its status; bad input: 400; else 500).
#include "server/api_server.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/logging.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/json_fields.h"
#include "server/request_bounds.h"
#include "server/responses_api.h"

namespace gs {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse json_response(int status, const json& body) {
  return HttpResponse{status, "application/json", dump(body), {}};
}

HttpResponse error_response(const ApiError& e) { return json_response(e.status(), e.to_json()); }

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413:
    case 431: return "invalid_request_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Served-model and --lora-modules names end up in responses, /v1/models and the log.
void check_served_names(const EngineClient& client) {
  std::vector<std::string> names = client.model().aliases;
  names.push_back(client.model().name);
  for (const std::string& n : names)
    if (const std::string why = model_name_problem(n); !why.empty())
      fail("the served model name '{}' is not valid: {} (choose another with --served-model-name)", log_safe(n), why);
  for (const std::string& n : client.lora_names())
    if (const std::string why = model_name_problem(n); !why.empty())
      fail("the LoRA adapter name '{}' is not valid: {} (see --lora-modules)", log_safe(n), why);
}

bool is_post_route(const std::string& path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses" ||
         path == "/v1/embeddings" || path == "/tokenize" || path == "/detokenize" || path == "/v1/load_lora_adapter" ||
         path == "/v1/unload_lora_adapter";
}

}  // namespace

ApiServer::ApiServer(EngineClient& client, ServerConfig cfg) : client_(client), cfg_(std::move(cfg)) {
  // Bodies and replies of a megabyte and more get their own mappings, given back when freed:
  // glibc would otherwise raise this threshold after the first such free and keep them.
  mallopt(M_MMAP_THRESHOLD, int(kTrimAfterBodyBytes));
  if (cfg_.chat_template.empty()) cfg_.chat_template = client_.model().chat_template;
  check_served_names(client_);
  startup_loras_ = client_.lora_names();
  preparse_chat_template(cfg_.chat_template);
  cfg_.http.max_body_bytes = cfg_.max_body_bytes;
  HttpHandler& handler = *this;
  responses_ = std::make_shared<ResponseStore>(cfg_.max_stored_responses);
  listener_ = std::make_unique<HttpListener>(handler, cfg_.http, cfg_.io_threads, cfg_.http_threads);
}

ApiServer::~ApiServer() { listener_.reset(); }

void ApiServer::start() { port_ = listener_->listen(cfg_.host, cfg_.port); }

bool ApiServer::shutdown(std::chrono::milliseconds timeout) {
  draining_ = true;
  listener_->stop_accepting();
  bool drained;
  {
    std::unique_lock lock(mu_);
    drained = idle_cv_.wait_for(lock, timeout, [&] { return in_flight_.load() == 0; });
  }
  if (!drained) spdlog::warn("shutdown: aborting {} unfinished requests", in_flight_.load());
  listener_->stop(std::chrono::seconds(2));
  return drained;
}

void ApiServer::finish_one() {
  {
    std::lock_guard lock(mu_);
    if (--in_flight_ == 0) idle_cv_.notify_all();
  }
  trim_if_idle();
}

void ApiServer::trim_if_idle() {
  if (in_flight_.load() == 0 && heavy_since_trim_.exchange(false)) malloc_trim(0);
}

bool ApiServer::authorized(const HttpRequest& req) const {
  if (cfg_.api_key.empty()) return true;
  if (req.path == "/health" || req.path == "/metrics" || req.path == "/ping" || req.path == "/version") return true;
  // RFC 9110 11.1: the scheme is case-insensitive; one or more spaces follow it.
  std::string_view a = req.authorization;
  constexpr std::string_view kScheme = "bearer";
  if (a.size() <= kScheme.size() || !std::equal(kScheme.begin(), kScheme.end(), a.begin(), [](char x, char y) {
        return x == std::tolower(static_cast<unsigned char>(y));
      }))
    return false;
  a.remove_prefix(kScheme.size());
  if (a.front() != ' ') return false;
  while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
  return a == cfg_.api_key;
}

bool ApiServer::is_fast(const HttpRequest& req) const {
  return !(req.method == "POST" && is_post_route(req.path)) || !authorized(req);
}

HttpResponse ApiServer::error(int status, const std::string& message) const {
  return error_response(ApiError(status, message, "", status_type(status)));
}

HttpResponse ApiServer::handle(const HttpRequest& req) {
  try {
    HttpResponse res = route(req);
    if (req.body.size() >= kTrimAfterBodyBytes) heavy_since_trim_ = true;  // its JSON and prompt are freed by now
    trim_if_idle();
    return res;
  } catch (const ApiError& e) {
    return error_response(e);
  } catch (const std::exception& e) {
    spdlog::error("{} {} failed: {}", req.method, req.path, e.what());
    return error(500, e.what());
  }
}

HttpResponse ApiServer::route(const HttpRequest& req) {
  if (!authorized(req))
    throw ApiError(401, "missing or wrong API key; send 'Authorization: Bearer <key>'", "", "authentication_error",
                   "invalid_api_key");
  const std::string& p = req.path;
  if (req.method == "POST") {
    if (p == "/v1/completions") return handle_generate(req, ApiKind::Completion);
    if (p == "/v1/chat/completions") return handle_generate(req, ApiKind::Chat);
    if (p == "/v1/responses") return handle_generate(req, ApiKind::Chat, /*responses_api=*/true);
    if (p == "/v1/embeddings") return handle_embeddings(req);
    if (p == "/tokenize") return handle_tokenize(req);
    if (p == "/detokenize") return handle_detokenize(req);
    if (p == "/v1/load_lora_adapter" || p == "/v1/unload_lora_adapter") return handle_lora_adapter(req);
  } else if (req.method == "GET" || req.method == "HEAD") {  // HEAD: the session drops the body
    if (p == "/health") {
      if (draining_) throw ApiError(503, "shutting down", "", "service_unavailable");
      if (const std::string err = client_.stats().fatal_error; !err.empty())
        throw ApiError(503, "unhealthy: " + err, "", "service_unavailable");
      return json_response(200, json::object());
    }
    if (p == "/metrics") {
      const Histogram steps = client_.iteration_tokens();
      std::string text = metrics_.render(client_.stats(), in_flight_.load(), client_.model().name,
                                         {&steps, client_.model().cache_config});
      return {200, "text/plain; version=0.0.4", std::move(text), {}};
    }
    if (p == "/v1/models") {
      json data = json::array();
      std::vector<std::string> names = {client_.model().name};
      names.insert(names.end(), client_.model().aliases.begin(), client_.model().aliases.end());
      for (const std::string& name : names)
        data.push_back({{"id", name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "graphserve"},
                        {"root", client_.model().name},
                        {"max_model_len", client_.model().max_model_len}});
      for (const std::string& lora : client_.lora_names())  // adapters, with their base as parent (vLLM)
        data.push_back({{"id", lora},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "graphserve"},
                        {"root", lora},
                        {"parent", client_.model().name},
                        {"max_model_len", client_.model().max_model_len}});
      return json_response(200, {{"object", "list"}, {"data", data}});
    }
  }
  if (auto r = info_route(req)) return std::move(*r);
  return error(404, fmt::format("no route for {} {}", req.method, p));
}

HttpResponse ApiServer::handle_generate(const HttpRequest& req, ApiKind kind, bool responses_api) {
  try {
    if (draining_) throw ApiError(503, "the server is shutting down", "", "service_unavailable");
    if (const std::string err = client_.stats().fatal_error; !err.empty())
      throw ApiError(503, "the engine failed: " + err, "", "service_unavailable");
    if (client_.model().pooling)
      throw ApiError(400, "this server runs an embedding model (--runner pooling): use /v1/embeddings");
    nlohmann::ordered_json ordered = parse_ordered_json_body(req.body, cfg_.max_json_depth);
    ResponsesCall responses;
    if (responses_api) {
      responses = prepare_responses_call(json(ordered), responses_);
      ordered = nlohmann::ordered_json::parse(responses.chat_body.dump());
    }
    const json body(ordered);
    GenerationRequest greq = kind == ApiKind::Chat
                                 ? parse_chat_request(body, ordered, client_, cfg_.chat_template, cfg_.limits)
                                 : parse_completion_request(body, client_, cfg_.limits, &ordered);
    if (kind == ApiKind::Chat) apply_tool_choice(ordered, cfg_.chat_output, client_, greq);
    if (worth_trimming_after(greq)) heavy_since_trim_ = true;
    if (client_.num_waiting() + greq.num_choices() > cfg_.max_waiting_requests)
      throw ApiError(503,
                     fmt::format("the server is overloaded ({} requests waiting); retry later", client_.num_waiting()),
                     "", "service_unavailable");
    ++in_flight_;
    try {
      std::string model = greq.lora.empty() ? client_.model().name : greq.lora;  // vLLM names the adapter
      auto gen =
          std::make_shared<Generation>(std::move(greq), std::move(model), client_, metrics_, [this] { finish_one(); });
      if (responses.format) gen->set_format(std::move(responses.format));
      return HttpResponse{200, "", "", std::move(gen)};
    } catch (const Error& e) {
      throw ApiError(400, e.what());  // the engine refused it (e.g. an invalid sampling value)
    }
  } catch (const ApiError& e) {
    metrics_.on_rejected(e.status());
    return error_response(e);
  } catch (const std::exception& e) {  // a tokenizer or template error on this input
    metrics_.on_rejected(400);
    return error_response(ApiError(400, e.what()));
  }
}

HttpResponse ApiServer::handle_tokenize(const HttpRequest& req) {
  try {
    const nlohmann::ordered_json ordered = parse_ordered_json_body(req.body, cfg_.max_json_depth);
    const json body(ordered);
    std::vector<int32_t> ids;
    if (body.contains("messages")) {
      auto messages = normalize_chat_messages(ordered["messages"]);
      bool gen_prompt = fields::get_bool(body, "add_generation_prompt", true);
      std::string prompt = render_chat_prompt(cfg_.chat_template, messages, chat_tools(ordered), gen_prompt,
                                              client_.model(), chat_template_kwargs(ordered));
      check_prompt_bytes(prompt.size(), client_.model(), "messages");
      ids = client_.encode(prompt, fields::get_bool(body, "add_special_tokens", false));
    } else {
      if (!body.contains("prompt") || !body["prompt"].is_string())
        bad_param("prompt", "'prompt' (a string) or 'messages' is required");
      const std::string& prompt = body["prompt"].get_ref<const std::string&>();
      check_prompt_bytes(prompt.size(), client_.model(), "prompt");
      ids = client_.encode(prompt, fields::get_bool(body, "add_special_tokens", true));
    }
    return json_response(200,
                         {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", client_.model().max_model_len}});
  } catch (const ApiError& e) {
    return error_response(e);
  } catch (const std::exception& e) {
    return error_response(ApiError(400, e.what()));
  }
}

HttpResponse ApiServer::handle_detokenize(const HttpRequest& req) {
  try {
    json body = parse_json_body(req.body, cfg_.max_json_depth);
    if (!body.contains("tokens")) bad_param("tokens", "'tokens' (a list of token ids) is required");
    std::vector<int> ids = fields::get_int_list(body, "tokens", 0, client_.model().vocab_size - 1, 1u << 20);
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    return json_response(200, {{"prompt", client_.decode(ids32)}});
  } catch (const ApiError& e) {
    return error_response(e);
  } catch (const std::exception& e) {
    return error_response(ApiError(400, e.what()));
  }
}

}  // namespace gs
