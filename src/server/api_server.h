// ApiServer: the OpenAI-compatible HTTP API over an EngineClient.
//   POST /v1/completions, /v1/chat/completions (JSON or Server-Sent Events)
//   GET  /v1/models, /health, /metrics;  POST /tokenize, /detokenize
// Errors are OpenAI error objects; limits (body size, JSON depth, waiting queue, API key)
// are enforced before any work is queued.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/engine_client.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace gs {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port (see ApiServer::port())
  std::string api_key;                  // "": no authentication
  int max_waiting_requests = 1024;      // queued engine requests beyond which we answer 503
  size_t max_body_bytes = 16u << 20;    // larger bodies get 413
  int max_json_depth = 64;
  int http_threads = 256;               // concurrent connections served
  std::string chat_template;            // overrides the model's template when not empty
  RequestLimits limits;
};

class ApiServer {
 public:
  ApiServer(EngineClient& client, ServerConfig cfg);
  ~ApiServer();  // stops at once (no draining)
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds the socket and serves on a background thread. Throws gs::Error if it cannot bind.
  void start();
  int port() const { return port_; }
  // Graceful stop: new generation requests get 503, in-flight ones finish (up to `timeout`),
  // then the listener closes. Returns false when some had to be cut off.
  bool shutdown(std::chrono::milliseconds timeout);
  int in_flight() const { return in_flight_.load(); }
  const Metrics& metrics() const { return metrics_; }

 private:
  void routes();
  void handle_generate(const httplib::Request& req, httplib::Response& res, ApiKind kind);
  void stream(std::shared_ptr<class Generation> gen, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  bool authorized(const httplib::Request& req) const;
  void finish_one();

  EngineClient& client_;
  ServerConfig cfg_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::mutex mu_;
  std::condition_variable idle_cv_;
};

}  // namespace gs
