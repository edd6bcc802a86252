// HttpRequest / HttpResponse / HttpHandler: what the connection layer (HttpSession) hands to
// the API and gets back. A response either carries its whole body or a Generation whose
// outputs become the body (a JSON object when it finishes, or Server-Sent Events as they come).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gs {

class Generation;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string authorization;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::shared_ptr<Generation> generation;  // set: the body comes from it
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // True for requests answered at once without touching the engine or the tokenizer
  // (/health, /metrics, /v1/models, errors): they run on the I/O thread, never queued.
  virtual bool is_fast(const HttpRequest& req) const = 0;
  // Never throws: errors become error responses.
  virtual HttpResponse handle(const HttpRequest& req) = 0;
  // The answer to a request the connection layer refuses itself (413, 431, 400 bad HTTP).
  virtual HttpResponse error(int status, const std::string& message) const = 0;
};

}  // namespace gs
