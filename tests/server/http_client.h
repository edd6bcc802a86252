// Small HTTP helpers for server tests: JSON posts and Server-Sent-Event streams, with timeouts
// so a broken server fails a test instead of hanging it.
#pragma once
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gs::test {

struct HttpResult {
  int status = 0;  // 0: no answer (connection failed or timed out)
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

inline httplib::Client make_client(int port) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(30);
  cli.set_write_timeout(10);
  return cli;
}

inline HttpResult post(int port, const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
  auto cli = make_client(port);
  auto r = cli.Post(path.c_str(), headers, body, "application/json");
  return r ? HttpResult{r->status, r->body} : HttpResult{};
}

inline HttpResult get(int port, const std::string& path) {
  auto cli = make_client(port);
  auto r = cli.Get(path.c_str());
  return r ? HttpResult{r->status, r->body} : HttpResult{};
}

struct SseResult {
  int status = 0;
  std::vector<nlohmann::json> events;  // parsed data: payloads before [DONE]
  bool done = false;                   // saw data: [DONE]
  std::string raw;
  std::string error;  // httplib's error when there was no complete answer
};

// Posts `body` and reads the event stream; with `stop_after` >= 0 it hangs up after that many
// events (a client that goes away).
inline SseResult post_stream(int port, const std::string& path, const std::string& body, int stop_after = -1) {
  SseResult out;
  auto cli = make_client(port);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  std::string pending;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    out.raw.append(data, len);
    pending.append(data, len);
    size_t pos;
    while ((pos = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, pos);
      pending.erase(0, pos + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      std::string payload = event.substr(6);
      if (payload == "[DONE]")
        out.done = true;
      else
        out.events.push_back(nlohmann::json::parse(payload, nullptr, false));
    }
    return stop_after < 0 || static_cast<int>(out.events.size()) < stop_after;
  };
  auto r = cli.send(req);
  if (r)
    out.status = r->status;
  else
    out.error = httplib::to_string(r.error());
  return out;
}

}  // namespace gs::test
