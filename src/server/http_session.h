// HttpSession: one HTTP/1.1 connection, driven by Boost.Beast on an Asio strand, never blocking
// its I/O thread. It reads one request at a time (pipelined ones wait in the buffer, so answers
// go out in order) under deadlines: keep-alive idle until the first byte, then a total deadline
// for the headers and another for the body. Header and body sizes are limited by the parser as
// bytes arrive, whatever the transfer encoding (431 / 413 before anything is buffered).
// Requests that need the tokenizer or the engine run on the worker pool; a Generation's outputs
// arrive through its queue's listener. While an answer is pending the socket is watched, and a
// client that goes away aborts its Generation at once (its KV blocks are freed).
#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/http_message.h"

namespace gs {

struct HttpLimits {
  std::chrono::milliseconds idle_timeout{5000};     // keep-alive: waiting for a request's first byte
  std::chrono::milliseconds header_timeout{10000};  // all headers of one request, in total
  std::chrono::milliseconds body_timeout{60000};    // the whole body of one request
  std::chrono::milliseconds write_timeout{60000};   // one write to a client that does not read
  size_t max_header_bytes = 64u << 10;
  size_t max_body_bytes = 16u << 20;
  bool access_log = true;  // one info line per answered request (off: --disable-log-requests)
};

// Whether the engine thread may still post "outputs arrived" into the I/O context. The
// listener closes it before it stops its I/O threads; close() waits for a notification in
// flight. The engine thread holds no reference to a session, so a session never outlives its
// listener on another thread.
struct NotifyGate {
  std::mutex mu;
  bool open = true;
  void close() {
    std::lock_guard lock(mu);
    open = false;
  }
};

// Where the engine thread's output listener posts: the session's strand while the session lives
// (its destructor drops the executor under the gate's lock), so no copy of an executor outlives
// the I/O context on the engine thread (a strand's last copy touches its io_context's service).
struct NotifyTarget {
  std::optional<boost::asio::any_io_executor> ex;
  std::atomic<bool> pending{false};  // a notification is posted and has not run yet
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  // `on_destroy` runs in the destructor (the listener's registry of open connections); `gate`
  // is the listener's (see NotifyGate).
  HttpSession(Socket socket, HttpHandler& handler, boost::asio::thread_pool& workers, const HttpLimits& limits,
              std::function<void(HttpSession*)> on_destroy, std::shared_ptr<NotifyGate> gate);
  ~HttpSession();

  void start();  // posts the first read to the session's strand
  // Server shutdown: an open stream gets a final error event and [DONE]; a waiting
  // non-streaming request gets 503; an idle connection is closed. Thread-safe.
  void stop();

 private:
  void on_stop();
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;
  void wait_for_request();
  void read_header();
  void on_header(boost::system::error_code ec);
  void read_body();
  void on_request(boost::system::error_code ec);
  void dispatch();
  void respond(HttpResponse res);
  void write_whole(int status, const std::string& content_type, std::string body, bool close);
  void after_write(boost::system::error_code ec);

  void start_generation(std::shared_ptr<Generation> gen);
  void on_outputs();
  void queue_chunk(const std::string& data);
  void flush();
  void finish_stream(const std::string& tail);

  void watch_client();
  void on_watch(boost::system::error_code ec);
  void client_gone();

  void arm(std::chrono::milliseconds d);
  void disarm();
  void on_deadline();
  void refuse(int status, const std::string& message);
  void log_access(int status) const;
  void close();
  void linger_close();
  void drain();

  Socket socket_;
  boost::asio::any_io_executor ex_;  // the socket's strand: every member runs on it
  boost::asio::steady_timer deadline_;
  HttpHandler& handler_;
  boost::asio::thread_pool& workers_;
  const HttpLimits& limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::function<void(HttpSession*)> on_destroy_;
  std::shared_ptr<NotifyGate> gate_;
  std::shared_ptr<NotifyTarget> notify_;  // shared with the engine thread's listener

  bool keep_alive_ = true;
  bool http10_ = false;
  bool closed_ = false;
  bool busy_ = false;      // a request is being answered (no read of the next one)
  bool watching_ = false;  // an async_wait on the socket is pending
  bool resume_after_watch_ = false;
  bool writing_ = false;
  bool stopping_ = false;
  bool peer_eof_ = false;                  // the client shut its side while we were answering
  std::string peer_;                       // "address:port" of the client, for the access log
  std::string method_ = "-", path_ = "-";  // of the request being answered
  std::shared_ptr<Generation> gen_;
  bool streaming_ = false;
  bool stream_done_ = false;  // the last bytes of the stream are queued
  std::string out_;           // stream bytes waiting for the current write to finish
  std::string writing_buf_;   // the bytes of the write in progress
  std::unique_ptr<std::array<char, 4096>> linger_buf_;
};

}  // namespace gs
