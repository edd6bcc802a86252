// TCP framing: [u32 type][u64 length][payload], blocking sockets polled against deadlines; an
// attached ShmLane first, the socket for the rest.
#include "executor/connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "executor/shm_lane.h"

namespace gs {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Polls `fds` without sleeping until one is ready or spin_until_s passes; poll()'s result.
int spin_poll(pollfd* fds, size_t n, double spin_until_s) {
  int r = 0;
  while ((r = poll(fds, n, 0)) == 0 && now_s() < spin_until_s) {}
  return r;
}

// Waits until fd is readable (or has an error / EOF); false at the deadline. Spins first until
// spin_until_s.
bool wait_readable(int fd, double deadline, double spin_until_s = 0) {
  pollfd s{fd, POLLIN, 0};
  if (spin_poll(&s, 1, spin_until_s) != 0) return true;  // ready, or an error for read() to report
  for (;;) {
    const double left = deadline - now_s();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, int(std::min(left, 1.0) * 1000) + 1);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let read() report it
  }
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  GS_CHECK(rc == 0 && res, "cannot resolve --master-addr '{}': {}", host, gai_strerror(rc));
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  a.sin_port = htons(uint16_t(port));
  return a;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Connection::Connection(int fd) : fd_(fd) {}

Connection::Connection(Connection&& o) noexcept : fd_(o.fd_), lane_(std::move(o.lane_)) { o.fd_ = -1; }

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    lane_ = std::move(o.lane_);
    o.fd_ = -1;
  }
  return *this;
}

void Connection::attach_lane(std::unique_ptr<ShmLane> lane) { lane_ = std::move(lane); }

bool Connection::ready() const {
  if (lane_ && lane_->has_message()) return true;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) != 0;
}

Connection Connection::connect(const std::string& host, int port, double timeout_s) {
  const sockaddr_in addr = resolve(host, port);
  const double deadline = now_s() + timeout_s;
  for (;;) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    GS_CHECK(fd >= 0, "socket() failed: {}", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      set_nodelay(fd);
      return Connection(fd);
    }
    const int e = errno;
    close(fd);
    GS_CHECK(now_s() < deadline,
             "cannot connect to the driver at {}:{} within {:.0f} s: {} (is graphserve serve / "
             "generate running on node 0 with the same --master-addr and --master-port?)",
             host, port, timeout_s, std::strerror(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Connection::send(MsgType type, const std::string& payload) {
  if (lane_ && lane_->post(type, payload)) return;
  std::string frame(12 + payload.size(), '\0');
  const uint32_t t = uint32_t(type);
  const uint64_t n = payload.size();
  std::memcpy(frame.data(), &t, 4);
  std::memcpy(frame.data() + 4, &n, 8);
  std::memcpy(frame.data() + 12, payload.data(), payload.size());
  for (size_t off = 0; off < frame.size();) {
    const ssize_t w = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    GS_CHECK(w > 0, "sending to a tensor-parallel peer failed: {} (the peer exited)", std::strerror(errno));
    off += size_t(w);
  }
}

bool Connection::read_exact(void* p, size_t n, double deadline, const std::string& peer, double spin_until_s) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t off = 0; off < n;) {
    if (!wait_readable(fd_, deadline, spin_until_s)) return false;
    const ssize_t r = ::recv(fd_, b + off, n - off, 0);
    if (r < 0 && errno == EINTR) continue;
    GS_CHECK(r > 0, "{} closed its connection ({}): it exited or crashed; see its log", peer,
             r == 0 ? "end of stream" : std::strerror(errno));
    off += size_t(r);
  }
  return true;
}

Message Connection::recv(double timeout_s, const std::string& peer, double spin_s) {
  const double now = now_s(), deadline = now + timeout_s, spin_until = now + std::min(spin_s, timeout_s);
  std::optional<Message> m = lane_ ? recv_lane(deadline, peer, spin_until) : recv_socket(deadline, peer, spin_until);
  GS_CHECK(m, "{} did not answer within {:.0f} s: it hangs (or a peer rank it waits for died)", peer, timeout_s);
  return std::move(*m);
}

// The lane's next message; the socket is checked now and then for what did not fit the lane and
// for the end of stream of a peer that died.
std::optional<Message> Connection::recv_lane(double deadline, const std::string& peer, double spin_until_s) {
  for (uint32_t i = 0;; ++i) {
    if (std::optional<Message> m = lane_->take()) return m;
    const bool spinning = now_s() < spin_until_s;
    if (!spinning || i % 64 == 63) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 0) != 0) return recv_socket(deadline, peer, 0);
      if (now_s() >= deadline) return std::nullopt;
    }
    if (!spinning) lane_->sleep(10);
  }
}

std::optional<Message> Connection::recv_socket(double deadline, const std::string& peer, double spin_until_s) {
  uint8_t head[12];
  if (!read_exact(head, 12, deadline, peer, spin_until_s)) return std::nullopt;
  uint32_t t = 0;
  uint64_t n = 0;
  std::memcpy(&t, head, 4);
  std::memcpy(&n, head + 4, 8);
  GS_CHECK(n < (uint64_t(1) << 32), "{} sent a malformed message ({} bytes)", peer, n);
  Message m{MsgType(t), std::string(size_t(n), '\0')};
  if (!read_exact(m.payload.data(), size_t(n), deadline + 60.0, peer, spin_until_s)) return std::nullopt;
  return m;
}

int wait_any(const std::vector<const Connection*>& conns, double timeout_s, double spin_s) {
  if (std::any_of(conns.begin(), conns.end(), [](const Connection* c) { return c->has_lane(); })) {
    const double now = now_s(), deadline = now + timeout_s, spin_until = now + std::min(spin_s, timeout_s);
    for (;;) {
      for (size_t i = 0; i < conns.size(); ++i)
        if (conns[i]->ready()) return int(i);
      const double t = now_s();
      if (t >= deadline) return -1;
      if (t >= spin_until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::vector<pollfd> fds;
  for (const Connection* c : conns) fds.push_back({c->fd(), POLLIN, 0});
  int r = spin_poll(fds.data(), fds.size(), now_s() + std::min(spin_s, timeout_s));
  if (r == 0) r = poll(fds.data(), fds.size(), int(timeout_s * 1000));
  if (r <= 0) return -1;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents) return int(i);
  return -1;
}

double tp_spin_seconds(bool gpu_ranks) {
  const char* e = std::getenv("GRAPHSERVE_TP_SPIN_MS");
  if (e && *e) return std::max(0.0, std::atof(e)) / 1000.0;
  return gpu_ranks ? kTpSpinMs / 1000.0 : 0.0;
}

Listener::Listener(const std::string& host, int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  GS_CHECK(fd_ >= 0, "socket() failed: {}", std::strerror(errno));
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = resolve(host, port);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 64) != 0) {
    const int e = errno;
    close(fd_);
    fail("cannot listen on {}:{} for tensor-parallel workers: {} (pick another --master-port)", host, port,
         std::strerror(e));
  }
  socklen_t len = sizeof(a);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

Listener::~Listener() { close(fd_); }

Connection Listener::accept(double timeout_s, const std::string& waiting_for) {
  GS_CHECK(wait_readable(fd_, now_s() + timeout_s), "{} did not connect within {:.0f} s (on port {})", waiting_for,
           timeout_s, port_);
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  GS_CHECK(fd >= 0, "accept() failed: {}", std::strerror(errno));
  set_nodelay(fd);
  return Connection(fd);
}

}  // namespace gs
