// ApiServer: the OpenAI-compatible HTTP API over an EngineClient.
//   POST /v1/completions, /v1/chat/completions (JSON or Server-Sent Events)
//   POST /v1/responses (server/responses_api.cpp), /v1/embeddings (server/embeddings_api.cpp)
//   GET  /v1/models, /v1/models/{id}, /health, /ping, /version, /metrics;  POST /tokenize, /detokenize
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter (server/lora_routes.cpp)
// Errors are OpenAI error objects; limits (body size, JSON depth, waiting queue, API key)
// are enforced before any work is queued. Connections are served by HttpListener (Boost.Beast
// on a few Asio threads); this class is the routing and the OpenAI semantics.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/engine_client.h"
#include "server/http_listener.h"
#include "server/http_message.h"
#include "server/lora_policy.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/response_store.h"

namespace gs {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port (see ApiServer::port())
  std::string api_key;                // "": no authentication
  int max_waiting_requests = 1024;    // queued engine requests beyond which we answer 503
  size_t max_body_bytes = 16u << 20;  // larger bodies get 413 (however they are sent)
  int max_json_depth = 64;
  int io_threads = 2;         // threads running every connection's I/O
  int http_threads = 32;      // workers that parse, tokenize and submit requests
  HttpLimits http;            // deadlines and the header size limit
  std::string chat_template;  // overrides the model's template when not empty
  RequestLimits limits;
  std::string version = "unknown";     // what GET /version reports
  size_t max_stored_responses = 1000;  // Responses API store (previous_response_id); 0: off
  LoraRoutePolicy lora;                // run-time LoRA loading: off unless the operator opts in
  ChatOutputFlags chat_output;         // --enable-auto-tool-choice, --tool-call-parser, --reasoning-parser
};

class ApiServer : private HttpHandler {
 public:
  ApiServer(EngineClient& client, ServerConfig cfg);
  ~ApiServer() override;  // stops at once (no draining)
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds the socket and serves on a background thread. Throws gs::Error if it cannot bind.
  void start();
  int port() const { return port_; }
  // Graceful stop: stop accepting; new generation requests get 503, in-flight ones finish (up
  // to `timeout`); what remains is aborted (open streams get a final error event and [DONE]),
  // then every connection closes. Returns false when some had to be cut off.
  bool shutdown(std::chrono::milliseconds timeout);
  int in_flight() const { return in_flight_.load(); }
  const Metrics& metrics() const { return metrics_; }
  size_t connections() const { return listener_->connections(); }

 private:
  bool is_fast(const HttpRequest& req) const override;
  HttpResponse handle(const HttpRequest& req) override;
  HttpResponse error(int status, const std::string& message) const override;
  HttpResponse route(const HttpRequest& req);
  // Chat and completions; `responses_api`: a /v1/responses body, answered as the Responses API.
  HttpResponse handle_generate(const HttpRequest& req, ApiKind kind, bool responses_api = false);
  // POST /v1/embeddings (server/embeddings_api.cpp).
  HttpResponse handle_embeddings(const HttpRequest& req);
  // GET /version, GET|POST /ping, GET /v1/models/{id}, GET /v1/responses/{id} (server/info_routes.cpp).
  std::optional<HttpResponse> info_route(const HttpRequest& req);
  HttpResponse handle_tokenize(const HttpRequest& req);
  HttpResponse handle_detokenize(const HttpRequest& req);
  HttpResponse handle_lora_adapter(const HttpRequest& req);
  bool authorized(const HttpRequest& req) const;
  void finish_one();
  void trim_if_idle();  // malloc_trim once no generation runs, after a heavy request

  EngineClient& client_;
  ServerConfig cfg_;
  std::vector<std::string> startup_loras_;  // --lora-modules: never unloaded or replaced over HTTP
  Metrics metrics_;
  std::shared_ptr<ResponseStore> responses_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<bool> heavy_since_trim_{false};
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::unique_ptr<HttpListener> listener_;  // last: destroyed first, while the rest is alive
};

}  // namespace gs
