// Implements server/http_listener.h (HttpListener).
#include "server/http_listener.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <future>

#include "core/error.h"
#include "core/logging.h"

namespace gs {

namespace net = boost::asio;
using boost::system::error_code;
using tcp = net::ip::tcp;

HttpListener::HttpListener(HttpHandler& handler, HttpLimits limits, int io_threads, int worker_threads)
    : handler_(handler),
      limits_(limits),
      io_threads_(std::max(1, io_threads)),
      ioc_(io_threads_),
      work_(net::make_work_guard(ioc_)),
      workers_(static_cast<size_t>(std::max(1, worker_threads))),
      acceptor_(net::make_strand(ioc_)),
      retry_(acceptor_.get_executor()) {}

HttpListener::~HttpListener() {
  stop(std::chrono::milliseconds(0));
  workers_.join();
}

int HttpListener::listen(const std::string& host, int port) {
  error_code ec;
  tcp::resolver resolver(ioc_);
  auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  GS_CHECK(!ec && !found.empty(), "cannot listen on {}:{}: {}", host, port, ec ? ec.message() : "no address");
  const tcp::endpoint ep = found.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(4096, ec);
  GS_CHECK(!ec, "cannot listen on {}:{} ({}; in use, or not a local address?)", host, port, ec.message());
  const int bound = acceptor_.local_endpoint().port();
  accept();
  for (int i = 0; i < io_threads_; ++i) threads_.emplace_back([this] { ioc_.run(); });
  return bound;
}

void HttpListener::accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) {  // e.g. out of file descriptors: retry a little later instead of spinning
      spdlog::warn("accepting a connection failed: {}", ec.message());
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);  // streamed tokens are small writes
    auto session = std::make_shared<HttpSession>(
        std::move(socket), handler_, workers_, limits_, [this](HttpSession* s) { forget(s); }, gate_);
    {
      std::lock_guard lock(mu_);
      sessions_.emplace(session.get(), session);
    }
    session->start();
    accept();
  });
}

void HttpListener::forget(HttpSession* s) {
  std::lock_guard lock(mu_);
  sessions_.erase(s);
  if (sessions_.empty()) none_cv_.notify_all();
}

size_t HttpListener::connections() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void HttpListener::stop_accepting() {
  if (threads_.empty()) return;
  std::promise<void> closed;
  net::post(acceptor_.get_executor(), [&] {
    error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    closed.set_value();
  });
  closed.get_future().wait();
}

void HttpListener::stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  stop_accepting();
  std::vector<std::shared_ptr<HttpSession>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& [ptr, weak] : sessions_)
      if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  for (auto& s : open) s->stop();
  open.clear();
  {
    std::unique_lock lock(mu_);
    none_cv_.wait_for(lock, grace, [&] { return sessions_.empty(); });
  }
  gate_->close();  // from here no other thread posts into ioc_ or holds a session
  work_.reset();
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace gs
