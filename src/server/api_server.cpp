#include "server/api_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/json_body.h"
#include "server/json_fields.h"

namespace gs {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.to_json()); }

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

ApiServer::ApiServer(EngineClient& client, ServerConfig cfg)
    : client_(client), cfg_(std::move(cfg)), http_(std::make_unique<httplib::Server>()) {
  if (cfg_.chat_template.empty()) cfg_.chat_template = client_.model().chat_template;
  const int threads = std::max(4, cfg_.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(cfg_.max_body_bytes);
  http_->set_keep_alive_timeout(2);  // bounds how long shutdown waits on idle connections
  http_->set_socket_options([this](int fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    // Streamed tokens are small writes: without TCP_NODELAY, Nagle's algorithm holds them back
    // and clients see tokens in bursts. Accepted sockets inherit it from the listening socket.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    listen_fd_ = fd;
  });
  routes();
}

ApiServer::~ApiServer() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

void ApiServer::start() {
  port_ = cfg_.port == 0 ? http_->bind_to_any_port(cfg_.host)
                         : (http_->bind_to_port(cfg_.host, cfg_.port) ? cfg_.port : -1);
  GS_CHECK(port_ > 0, "cannot listen on {}:{} (in use, or not a local address?)", cfg_.host, cfg_.port);
  // httplib listens with a backlog of 5, which drops connections when many clients arrive at
  // once; listening again on the same socket raises it.
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() is a no-op until the listener runs, so make sure it does before returning.
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool ApiServer::shutdown(std::chrono::milliseconds timeout) {
  draining_ = true;
  bool drained;
  {
    std::unique_lock lock(mu_);
    drained = idle_cv_.wait_for(lock, timeout, [&] { return in_flight_.load() == 0; });
  }
  http_->stop();
  if (thread_.joinable()) thread_.join();
  return drained;
}

void ApiServer::finish_one() {
  std::lock_guard lock(mu_);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

bool ApiServer::authorized(const httplib::Request& req) const {
  if (cfg_.api_key.empty()) return true;
  if (req.path == "/health" || req.path == "/metrics") return true;
  return req.get_header_value("Authorization") == "Bearer " + cfg_.api_key;
}

void ApiServer::routes() {
  auto& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "missing or wrong API key; send 'Authorization: Bearer <key>'",
                             "", "authentication_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Fills in an error object for errors httplib answers itself (404, 413, 400 on bad HTTP).
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 413 ? "the request body is too large"
                    : res.status == 404 ? fmt::format("no route for {} {}", req.method, req.path)
                                        : fmt::format("HTTP error {}", res.status);
    send_json(res, res.status, ApiError(res.status, msg, "", status_type(res.status)).to_json());
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    spdlog::error("request failed: {}", msg);
    send_json(res, 500, ApiError(500, msg, "", "server_error").to_json());
  });
  s.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
    handle_generate(q, r, ApiKind::Completion);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
    handle_generate(q, r, ApiKind::Chat);
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
    json model = {{"id", client_.model().name}, {"object", "model"}, {"created", 0},
                  {"owned_by", "graphserve"}, {"max_model_len", client_.model().max_model_len}};
    json data = json::array({model});
    for (const std::string& lora : client_.model().lora_names)  // adapters, with their base as parent (vLLM)
      data.push_back({{"id", lora}, {"object", "model"}, {"created", 0}, {"owned_by", "graphserve"},
                      {"root", lora}, {"parent", client_.model().name}, {"max_model_len", client_.model().max_model_len}});
    send_json(r, 200, {{"object", "list"}, {"data", data}});
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
    if (draining_) send_error(r, ApiError(503, "shutting down", "", "service_unavailable"));
    else send_json(r, 200, json::object());
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(metrics_.render(client_.stats(), in_flight_.load()), "text/plain; version=0.0.4");
  });
  s.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) { handle_tokenize(q, r); });
  s.Post("/detokenize", [this](const httplib::Request& q, httplib::Response& r) { handle_detokenize(q, r); });
}

void ApiServer::handle_generate(const httplib::Request& req, httplib::Response& res, ApiKind kind) {
  std::shared_ptr<Generation> gen;
  try {
    if (draining_) throw ApiError(503, "the server is shutting down", "", "service_unavailable");
    json body = parse_json_body(req.body, cfg_.max_json_depth);
    GenerationRequest greq =
        kind == ApiKind::Chat
            ? parse_chat_request(body, nlohmann::ordered_json::parse(req.body), client_,
                                 cfg_.chat_template, cfg_.limits)
            : parse_completion_request(body, client_, cfg_.limits);
    if (client_.num_waiting() + greq.num_choices() > cfg_.max_waiting_requests)
      throw ApiError(503, fmt::format("the server is overloaded ({} requests waiting); retry later",
                                      client_.num_waiting()),
                     "", "service_unavailable");
    ++in_flight_;
    try {
      gen = std::make_shared<Generation>(std::move(greq), client_.model().name, client_, metrics_,
                                         [this] { finish_one(); });
    } catch (const Error& e) {
      throw ApiError(400, e.what());  // the engine refused it (e.g. an invalid sampling value)
    }
  } catch (const ApiError& e) {
    metrics_.on_rejected(e.status());
    send_error(res, e);
    return;
  } catch (const std::exception& e) {  // a tokenizer or template error on this input
    metrics_.on_rejected(400);
    send_error(res, ApiError(400, e.what()));
    return;
  }
  if (gen->request().stream) return stream(std::move(gen), res);
  while (!gen->finished()) gen->next(std::chrono::milliseconds(100));
  send_json(res, 200, gen->builder().response());
}

void ApiServer::stream(std::shared_ptr<Generation> gen, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  auto opened = std::make_shared<bool>(false);
  res.set_chunked_content_provider(
      "text/event-stream",
      [gen, opened](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        if (!*opened) {
          *opened = true;
          for (const json& c : gen->builder().opening_chunks())
            if (!write(sse_event(c))) return false;
        }
        // Wait briefly for output, then pass everything already there in one go.
        auto chunks = gen->next(std::chrono::milliseconds(50));
        while (chunks) {
          for (const json& c : *chunks)
            if (!write(sse_event(c))) return false;  // the client went away: abort
          if (gen->finished()) break;
          chunks = gen->next(std::chrono::milliseconds(0));
        }
        if (!gen->finished()) return true;
        if (gen->request().include_usage && !write(sse_event(gen->builder().usage_chunk())))
          return false;
        if (!write(sse_done())) return false;
        sink.done();
        return true;
      },
      // Releases the Generation with the response: unfinished choices are aborted there.
      [gen](bool) mutable { gen.reset(); });
}

void ApiServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  try {
    json body = parse_json_body(req.body, cfg_.max_json_depth);
    std::vector<int32_t> ids;
    if (body.contains("messages")) {
      auto ordered = nlohmann::ordered_json::parse(req.body);
      auto messages = normalize_chat_messages(ordered["messages"]);
      bool gen_prompt = fields::get_bool(body, "add_generation_prompt", true);
      std::string prompt = render_chat_prompt(cfg_.chat_template, messages,
                                              ordered.value("tools", nlohmann::ordered_json()),
                                              gen_prompt, client_.model());
      ids = client_.encode(prompt, fields::get_bool(body, "add_special_tokens", false));
    } else {
      if (!body.contains("prompt") || !body["prompt"].is_string())
        bad_param("prompt", "'prompt' (a string) or 'messages' is required");
      ids = client_.encode(body["prompt"].get<std::string>(),
                           fields::get_bool(body, "add_special_tokens", true));
    }
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()},
                         {"max_model_len", client_.model().max_model_len}});
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(400, e.what()));
  }
}

void ApiServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  try {
    json body = parse_json_body(req.body, cfg_.max_json_depth);
    if (!body.contains("tokens")) bad_param("tokens", "'tokens' (a list of token ids) is required");
    std::vector<int> ids = fields::get_int_list(body, "tokens", 0, client_.model().vocab_size - 1,
                                                1u << 20);
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    send_json(res, 200, {{"prompt", client_.decode(ids32)}});
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(400, e.what()));
  }
}

}  // namespace gs
