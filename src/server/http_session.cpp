// Implements server/http_session.h (HttpSession).
#include "server/http_session.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <optional>

#include <fmt/format.h>

#include "core/logging.h"
#include "server/api_error.h"
#include "server/generation.h"

namespace gs {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

// Room for one request's headers plus what a pipelining client sends ahead of our answers.
constexpr size_t kPipelineSlack = 128u << 10;
constexpr std::chrono::milliseconds kLinger{500};

std::string chunk(const std::string& data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

beast::string_view trimmed(beast::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// What a request's headers ask that we do not do (RFC 9112 6.1, RFC 9110 8.4 and 7.2), as
// nginx answers: a transfer coding other than chunked is 501, a content coding 415, and an
// HTTP/1.1 request without Host 400.
struct Refusal {
  int status;
  std::string message;
};
std::optional<Refusal> unsupported_framing(const http::request<http::string_body>& req) {
  if (auto te = req.find(http::field::transfer_encoding); te != req.end())
    if (!beast::iequals(trimmed(te->value()), "chunked"))
      return Refusal{501, fmt::format("Transfer-Encoding '{}' is not supported: send the body plain or chunked",
                                      std::string(trimmed(te->value()).substr(0, 64)))};
  if (auto ce = req.find(http::field::content_encoding); ce != req.end())
    if (!beast::iequals(trimmed(ce->value()), "identity"))
      return Refusal{415, fmt::format("Content-Encoding '{}' is not supported: send the body uncompressed",
                                      std::string(trimmed(ce->value()).substr(0, 64)))};
  if (req.version() >= 11 && req.find(http::field::host) == req.end())
    return Refusal{400, "an HTTP/1.1 request needs a Host header"};
  return std::nullopt;
}

}  // namespace

HttpSession::HttpSession(Socket socket, HttpHandler& handler, net::thread_pool& workers, const HttpLimits& limits,
                         std::function<void(HttpSession*)> on_destroy, std::shared_ptr<NotifyGate> gate)
    : socket_(std::move(socket)),
      ex_(socket_.get_executor()),
      deadline_(ex_),
      handler_(handler),
      workers_(workers),
      limits_(limits),
      buffer_(limits.max_header_bytes + kPipelineSlack),
      on_destroy_(std::move(on_destroy)),
      gate_(std::move(gate)),
      notify_(std::make_shared<NotifyTarget>()) {
  notify_->ex = ex_;
  error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) peer_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

HttpSession::~HttpSession() {
  {
    std::lock_guard lock(gate_->mu);  // waits for a notification being posted
    notify_->ex.reset();
  }
  gen_.reset();  // aborts what is unfinished
  if (on_destroy_) on_destroy_(this);
}

void HttpSession::start() {
  net::dispatch(ex_, [self = shared_from_this()] { self->wait_for_request(); });
}

void HttpSession::stop() {
  net::post(ex_, [self = shared_from_this()] { self->on_stop(); });
}

// ---- reading a request --------------------------------------------------------------------

void HttpSession::wait_for_request() {
  busy_ = false;
  if (closed_) return;
  if (stopping_ || !keep_alive_) return close();
  if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
  arm(limits_.idle_timeout);
  socket_.async_wait(Socket::wait_read, [self = shared_from_this()](error_code ec) {
    if (ec) return self->close();
    self->read_header();
  });
}

void HttpSession::read_header() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  arm(limits_.header_timeout);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(error_code ec) {
  if (closed_) return;
  if (ec) return on_request(ec);
  const auto& req = parser_->get();
  http10_ = req.version() < 11;
  keep_alive_ = req.keep_alive();
  if (const auto no = unsupported_framing(req)) return refuse(no->status, no->message);
  // Without either, a request has no body (RFC 9112 6.3): say so instead of parsing the body
  // that follows as the next request.
  if (req.method() == http::verb::post && !parser_->content_length() && !parser_->chunked())
    return refuse(411, "a POST needs a Content-Length header or Transfer-Encoding: chunked");
  if (parser_->is_done()) return on_request({});
  if (!beast::iequals(req[http::field::expect], "100-continue") || http10_) return read_body();
  // The client waits for this before it sends the body (curl does for bodies over 1 MB).
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  arm(limits_.write_timeout);
  net::async_write(socket_, net::buffer(kContinue), [self = shared_from_this()](error_code e, size_t) {
    if (e) return self->close();
    self->read_body();
  });
}

void HttpSession::read_body() {
  arm(limits_.body_timeout);
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_request(ec); });
}

void HttpSession::on_request(error_code ec) {
  if (closed_) return;
  disarm();
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return refuse(431, fmt::format("the request headers are larger than {} bytes", limits_.max_header_bytes));
  if (ec == http::error::body_limit)
    return refuse(413, fmt::format("the request body is larger than {} bytes", limits_.max_body_bytes));
  if (!ec) return dispatch();
  const bool bad_http = ec.category() == http::make_error_code(http::error::bad_target).category() &&
                        ec != http::error::end_of_stream && ec != http::error::partial_message;
  // A malformed request: the connection cannot be trusted to be in sync any more.
  if (bad_http) return refuse(400, "malformed HTTP request: " + ec.message());
  close();  // the client closed (or a socket error, or a deadline): nothing to answer
}

void HttpSession::dispatch() {
  auto& msg = parser_->get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  const std::string target(msg.target());
  req.path = target.substr(0, target.find('?'));
  req.authorization = std::string(msg[http::field::authorization]);
  req.body = std::move(msg.body());
  method_ = req.method;
  path_ = req.path;
  parser_.reset();
  busy_ = true;
  if (handler_.is_fast(req)) return respond(handler_.handle(req));
  watch_client();
  net::post(workers_, [self = shared_from_this(), req = std::move(req)] {
    HttpResponse res = self->handler_.handle(req);
    net::post(self->ex_, [self, res = std::move(res)]() mutable { self->respond(std::move(res)); });
  });
}

// ---- answering ----------------------------------------------------------------------------

void HttpSession::respond(HttpResponse res) {
  if (closed_) return;  // the client went away; dropping the Generation aborts it
  if (res.generation && peer_eof_) return client_gone();
  if (res.generation && stopping_) {
    res = handler_.error(503, "the server is shutting down");
    keep_alive_ = false;
  }
  if (!res.generation) return write_whole(res.status, res.content_type, std::move(res.body), !keep_alive_);
  start_generation(std::move(res.generation));
}

void HttpSession::log_access(int status) const {
  if (limits_.access_log) spdlog::info("{} \"{} {} HTTP/1.{}\" {}", peer_, method_, path_, http10_ ? 0 : 1, status);
}

void HttpSession::write_whole(int status, const std::string& content_type, std::string body, bool close_after) {
  if (close_after) keep_alive_ = false;
  log_access(status);
  auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), http10_ ? 10 : 11);
  msg->set(http::field::server, "graphserve");
  msg->set(http::field::content_type, content_type);
  msg->keep_alive(keep_alive_);
  msg->body() = std::move(body);
  msg->prepare_payload();
  if (method_ == "HEAD") msg->body().clear();  // the GET's headers, Content-Length included, and no body
  writing_ = true;
  arm(limits_.write_timeout);
  http::async_write(socket_, *msg, [self = shared_from_this(), msg](error_code ec, size_t) {
    self->writing_ = false;
    self->after_write(ec);
  });
}

void HttpSession::after_write(error_code ec) {
  disarm();
  if (ec) return close();
  if (!keep_alive_ || stopping_) return linger_close();
  if (watching_) {  // let the pending watch end first: it may hold the next request's bytes
    resume_after_watch_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  wait_for_request();
}

// ---- generations --------------------------------------------------------------------------

void HttpSession::start_generation(std::shared_ptr<Generation> gen) {
  gen_ = std::move(gen);
  streaming_ = gen_->request().stream;
  stream_done_ = false;
  if (streaming_) {
    log_access(200);
    if (http10_) keep_alive_ = false;  // no chunked encoding: the end of the body is the close
    out_ = fmt::format(
        "HTTP/1.{} 200 OK\r\nServer: graphserve\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\n{}{}\r\n",
        http10_ ? 0 : 1, http10_ ? "" : "Transfer-Encoding: chunked\r\n", keep_alive_ ? "" : "Connection: close\r\n");
    queue_chunk(gen_->stream_opening());
  }
  // On the engine thread: no strong reference there (see NotifyGate).
  gen_->set_listener([weak = weak_from_this(), gate = gate_, target = notify_] {
    std::lock_guard lock(gate->mu);
    if (gate->open && target->ex && !target->pending.exchange(true))
      net::post(*target->ex, [weak] {
        if (auto self = weak.lock()) self->on_outputs();
      });
  });
  watch_client();
  on_outputs();  // what arrived before the listener was set
}

void HttpSession::on_outputs() {
  notify_->pending = false;
  if (closed_ || !gen_) return;
  while (auto chunks = gen_->next(std::chrono::milliseconds(0))) {
    if (streaming_) queue_chunk(gen_->stream_events(*chunks));
    if (gen_->finished()) break;
  }
  if (!gen_->finished()) return flush();
  if (!gen_->error().empty()) {  // the engine aborted a choice: its step failed on it
    const std::string msg = "the request failed in the engine: " + gen_->error();
    if (streaming_) return finish_stream(sse_event(ApiError(500, msg, "", "server_error").to_json()) + sse_done());
    gen_.reset();
    HttpResponse r = handler_.error(500, msg);
    return write_whole(r.status, r.content_type, std::move(r.body), false);
  }
  if (!streaming_) {
    std::string body = gen_->final_body();
    gen_.reset();
    return write_whole(200, "application/json", std::move(body), false);
  }
  finish_stream(gen_->stream_closing());
}

void HttpSession::queue_chunk(const std::string& data) {
  if (data.empty()) return;
  out_ += http10_ ? data : chunk(data);
}

void HttpSession::finish_stream(const std::string& tail) {
  gen_.reset();
  queue_chunk(tail);
  if (!http10_) out_ += "0\r\n\r\n";
  stream_done_ = true;
  flush();
}

void HttpSession::flush() {
  if (writing_ || out_.empty() || closed_) return;
  writing_buf_.swap(out_);
  out_.clear();
  writing_ = true;
  arm(limits_.write_timeout);
  net::async_write(socket_, net::buffer(writing_buf_), [self = shared_from_this()](error_code ec, size_t) {
    self->writing_ = false;
    self->writing_buf_.clear();
    self->disarm();
    if (ec) return self->client_gone();
    if (!self->out_.empty()) return self->flush();
    if (self->stream_done_) {
      self->stream_done_ = false;
      self->after_write({});
    }
  });
}

// ---- noticing a client that goes away -----------------------------------------------------

void HttpSession::watch_client() {
  if (watching_ || closed_) return;
  watching_ = true;
  socket_.async_wait(Socket::wait_read, [self = shared_from_this()](error_code ec) { self->on_watch(ec); });
}

void HttpSession::on_watch(error_code ec) {
  watching_ = false;
  if (closed_) return;
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    return wait_for_request();
  }
  if (ec) return client_gone();
  // Readable: the client closed, or sent its next (pipelined) request early. Keep those bytes.
  std::array<char, 1> peek;
  const ssize_t n = ::recv(socket_.native_handle(), peek.data(), 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return client_gone();
  if (n == 0) {
    // The client closed its side. A generation is aborted, as vLLM does; any other answer
    // (tokenize, an error) is still sent to a client that only half-closed.
    peer_eof_ = true;
    keep_alive_ = false;
    if (gen_) return client_gone();
    return;
  }
  if (n > 0) {
    const size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) return;  // full: stop reading until this answer is out
    auto space = buffer_.prepare(room);
    const ssize_t got = ::recv(socket_.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (got > 0) buffer_.commit(static_cast<size_t>(got));
  }
  watch_client();
}

void HttpSession::client_gone() {
  if (gen_) spdlog::debug("client went away; aborting its request");
  close();
}

// ---- shutdown -----------------------------------------------------------------------------

void HttpSession::on_stop() {
  stopping_ = true;
  if (closed_) return;
  if (!busy_) return close();  // idle, or still reading a request
  keep_alive_ = false;
  if (!gen_) return;  // answered by respond() when the worker is done
  if (streaming_) {
    ApiError e(503, "the server is shutting down; this request was aborted", "", "service_unavailable");
    return finish_stream(sse_event(e.to_json()) + sse_done());
  }
  gen_.reset();
  HttpResponse r = handler_.error(503, "the server is shutting down; this request was aborted");
  write_whole(r.status, r.content_type, std::move(r.body), true);
}

// ---- deadlines and closing ----------------------------------------------------------------

void HttpSession::arm(std::chrono::milliseconds d) {
  deadline_.expires_after(d);
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec && self->deadline_.expiry() <= std::chrono::steady_clock::now()) self->on_deadline();
  });
}

void HttpSession::disarm() { deadline_.expires_at(std::chrono::steady_clock::time_point::max()); }

void HttpSession::on_deadline() { close(); }

void HttpSession::refuse(int status, const std::string& message) {
  busy_ = true;
  method_ = path_ = "-";
  HttpResponse r = handler_.error(status, message);
  write_whole(r.status, r.content_type, std::move(r.body), true);
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  gen_.reset();
  error_code ec;
  deadline_.cancel();
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
}

// Closes after the client has seen our answer: shut our side, then read and drop what it still
// sends (bounded in time), so that closing with unread bytes does not reset the connection
// before the client reads an early 413.
void HttpSession::linger_close() {
  error_code ec;
  socket_.shutdown(Socket::shutdown_send, ec);
  if (ec) return close();
  arm(kLinger);
  linger_buf_ = std::make_unique<std::array<char, 4096>>();
  drain();
}

void HttpSession::drain() {
  socket_.async_read_some(net::buffer(*linger_buf_), [self = shared_from_this()](error_code ec, size_t) {
    if (ec || self->closed_) return self->close();
    self->drain();
  });
}

}  // namespace gs
