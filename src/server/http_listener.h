// HttpListener: the socket that accepts connections, the few I/O threads that run every
// HttpSession (Boost.Asio), the worker pool where slow requests run, and the registry of open
// connections that shutdown walks.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http_session.h"

namespace gs {

class HttpListener {
 public:
  HttpListener(HttpHandler& handler, HttpLimits limits, int io_threads, int worker_threads);
  ~HttpListener();  // closes every connection at once
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds host:port (0: any free port), starts the threads; returns the port. Throws gs::Error.
  int listen(const std::string& host, int port);
  void stop_accepting();
  // Tells every connection to stop (see HttpSession::stop), waits up to `grace` for them to
  // close, then stops the I/O threads.
  void stop(std::chrono::milliseconds grace);
  size_t connections() const;

 private:
  void accept();
  void forget(HttpSession* s);

  HttpHandler& handler_;
  const HttpLimits limits_;
  const int io_threads_;
  mutable std::mutex mu_;  // before the I/O context: sessions it destroys still unregister
  std::condition_variable none_cv_;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions_;
  std::shared_ptr<NotifyGate> gate_ = std::make_shared<NotifyGate>();
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  boost::asio::thread_pool workers_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace gs
