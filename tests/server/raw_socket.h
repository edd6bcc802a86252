// RawSocket: a blocking TCP client socket to 127.0.0.1 for tests that must speak broken or
// unusual HTTP (slow headers, pipelining, chunked bodies, half-closes). Every read is bounded
// by a timeout so a misbehaving server fails the test instead of hanging it.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace gs::test {

class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

  bool ok() const { return fd_ >= 0; }
  // Sends everything; false when the server closed or reset the connection.
  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until the server closes, `until` appears in what was read, or `timeout` passes.
  std::string read(std::chrono::milliseconds timeout, const std::string& until = "") {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }
  // True once a read saw the server close (or reset) the connection.
  bool closed() const { return closed_; }
  // Waits up to `timeout` for the server to close the connection (data is read and dropped).
  bool wait_closed(std::chrono::milliseconds timeout) {
    read(timeout);
    return closed_;
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

// Counts non-overlapping occurrences of `what` in `s`.
inline int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace gs::test
