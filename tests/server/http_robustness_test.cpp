// The connection layer against hostile or unusual clients, over a fake engine, with raw sockets:
// slow headers, floods of idle sockets, oversized headers and bodies in every transfer encoding,
// pipelining, half-closes, hang-ups on non-streaming requests, and shutdown deadlines.
// Every wait is bounded; deadlines are short so the whole file runs in a few seconds.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <thread>

#include "fake_engine.h"
#include "http_client.h"
#include "raw_socket.h"
#include "server/api_server.h"

namespace gs {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::RawSocket;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Each open socket is two descriptors in this process (client and server side).
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

class HttpRobust : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg.port = 0;
    cfg.http.idle_timeout = 3s;
    cfg.http.header_timeout = 1s;
    cfg.http.body_timeout = 1s;
    cfg.http.max_header_bytes = 8192;
    cfg.max_body_bytes = 1000;
  }
  void start() {
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
    port = server->port();
  }
  // GET /health on a fresh connection; returns its latency in ms (-1 when it failed).
  double health_ms() {
    const auto t = Clock::now();
    return test::get(port, "/health").status == 200 ? ms_since(t) : -1;
  }
  bool engine_idle() {
    for (int i = 0; i < 500 && (engine.live() > 0 || server->in_flight() > 0); ++i) std::this_thread::sleep_for(10ms);
    return engine.live() == 0 && server->in_flight() == 0;
  }
  test::FakeEngine engine;
  ServerConfig cfg;
  std::unique_ptr<ApiServer> server;
  int port = 0;
};

std::string post_request(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(HttpRobust, SlowHeadersNeitherBlockHealthNorOutliveTheHeaderDeadline) {
  start();
  std::vector<RawSocket> slow;
  for (int i = 0; i < 300; ++i) {
    slow.emplace_back(port);
    ASSERT_TRUE(slow.back().ok());
    slow.back().send("GET /health HTTP/1.1\r\nHost: x\r\nX-a: ");
  }
  // Trickle one byte per connection every 100 ms: a per-byte deadline would never fire.
  double worst = 0;
  const auto t0 = Clock::now();
  for (int round = 0; round < 6; ++round) {
    for (auto& s : slow) s.send("a");
    worst = std::max(worst, health_ms());
    ASSERT_GE(worst, 0) << "/health failed while slow connections were open";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LT(worst, 1000) << "/health waited behind slow clients";
  // The header deadline (1 s) is total: every slow connection is closed by 3 s.
  int closed = 0;
  for (auto& s : slow) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(3s - (Clock::now() - t0));
    closed += s.wait_closed(std::max(left, 1ms)) ? 1 : 0;
  }
  EXPECT_EQ(closed, 300);
  EXPECT_EQ(health_ms() >= 0, true);
}

TEST_F(HttpRobust, IdleSocketsAndOpenStreamsDoNotDelayHealth) {
  raise_fd_limit();
  cfg.io_threads = 2;
  cfg.http_threads = 4;
  start();
  engine.tick_ms = 20;
  std::vector<std::thread> streams;
  for (int i = 0; i < 5; ++i)
    streams.emplace_back(
        [&] { test::post_stream(port, "/v1/completions", R"({"prompt":"hi","max_tokens":40,"stream":true})"); });
  std::vector<RawSocket> idle;
  for (int i = 0; i < 2000; ++i) {
    idle.emplace_back(port);
    if (!idle.back().ok()) {
      idle.pop_back();
      break;
    }
  }
  EXPECT_GE(idle.size(), 1000u) << "could not open enough sockets (file descriptor limit?)";
  double worst = 0;
  for (int i = 0; i < 10; ++i) worst = std::max(worst, health_ms());
  EXPECT_GE(worst, 0);
  EXPECT_LT(worst, 1000);
  for (auto& t : streams) t.join();
}

TEST_F(HttpRobust, OversizedHeadersGet431) {
  start();
  RawSocket s(port);
  std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 2000; ++i) req += "X-" + std::to_string(i) + ": yyyyyyyy\r\n";
  s.send(req + "\r\n");
  std::string answer = s.read(3s, "}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("\"error\""), std::string::npos);
}

TEST_F(HttpRobust, ChunkedBodyOverTheLimitGets413BeforeItIsRead) {
  start();
  RawSocket s(port);
  s.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::string answer;
  // Keep sending 512-byte chunks (far past the 1000-byte limit) until the server answers.
  for (int i = 0; i < 200 && answer.empty(); ++i) {
    if (!s.send("200\r\n" + std::string(512, 'x') + "\r\n")) break;
    answer = s.read(20ms);
  }
  answer += s.read(2s, "}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
  // A small chunked body is read and answered normally.
  RawSocket ok(port);
  const std::string body = R"({"prompt":"ab"})";
  ok.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
          fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
  std::string r = ok.read(3s, "}");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("[97,98]"), std::string::npos) << r;
}

TEST_F(HttpRobust, ContentLengthOverTheLimitGets413AtOnce) {
  start();
  RawSocket s(port);
  s.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 150000000\r\n\r\n");
  std::string answer = s.read(3s, "}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
}

TEST_F(HttpRobust, PostWithoutLengthIsAnsweredEvenAfterAHalfClose) {
  start();
  RawSocket s(port);
  s.send("POST /tokenize HTTP/1.1\r\nHost: x\r\n\r\n{\"prompt\":\"ab\"}");
  s.shutdown_write();
  std::string answer = s.read(3s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << answer.substr(0, 200);
  EXPECT_TRUE(s.closed());
  // With a length, a half-closed client still gets its (non-generation) answer.
  RawSocket h(port);
  h.send(post_request("/tokenize", R"({"prompt":"ab"})"));
  h.shutdown_write();
  std::string r = h.read(3s);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST_F(HttpRobust, PipelinedRequestsAreAnsweredInOrder) {
  start();
  RawSocket s(port);
  s.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" +
         post_request("/v1/completions", R"({"prompt":"hi","max_tokens":3})") +
         post_request("/tokenize", R"({"prompt":"ab"})") +
         "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string all = s.read(5s);
  EXPECT_TRUE(s.closed());
  EXPECT_EQ(test::count_of(all, "HTTP/1.1 200"), 4) << all;
  const size_t completion = all.find("\"text_completion\""), tokens = all.find("[97,98]"),
               models = all.find("\"owned_by\"");
  ASSERT_NE(completion, std::string::npos) << all;
  EXPECT_LT(completion, tokens);
  EXPECT_LT(tokens, models);
}

TEST_F(HttpRobust, HangingUpOnANonStreamingRequestAbortsIt) {
  start();
  engine.tick_ms = 10;  // 120 tokens: over a second
  {
    RawSocket s(port);
    s.send(post_request("/v1/completions", R"({"prompt":"hi","max_tokens":120,"n":4})"));
    for (int i = 0; i < 200 && engine.live() < 4; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(engine.live(), 4);
  }  // closes the socket
  const auto t = Clock::now();
  ASSERT_TRUE(engine_idle());
  EXPECT_LT(ms_since(t), 800) << "the requests ran to the end instead of being aborted";
  EXPECT_EQ(engine.aborted.load(), 4);
}

TEST_F(HttpRobust, ShutdownCutsStreamsWithAFinalEventWithinTheDeadline) {
  start();
  engine.tick_ms = 20;  // 120 tokens: 2.4 s, longer than the shutdown deadline
  test::SseResult stream;
  test::HttpResult plain;
  std::thread a([&] {
    stream = test::post_stream(port, "/v1/completions", R"({"prompt":"hi","max_tokens":120,"stream":true})");
  });
  std::thread b([&] { plain = test::post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":120})"); });
  RawSocket slow(port);
  slow.send("GET /health HTTP/1.1\r\nHost: x\r\n");
  RawSocket idle(port);
  for (int i = 0; i < 400 && server->in_flight() < 2; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server->in_flight(), 2);
  const auto t = Clock::now();
  EXPECT_FALSE(server->shutdown(300ms));
  EXPECT_LT(ms_since(t), 2000);
  a.join();
  b.join();
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.done) << stream.raw.substr(stream.raw.size() > 300 ? stream.raw.size() - 300 : 0);
  ASSERT_FALSE(stream.events.empty());
  EXPECT_EQ(stream.events.back()["error"]["type"], "service_unavailable") << stream.raw;
  EXPECT_EQ(plain.status, 503) << plain.body;
  EXPECT_TRUE(slow.wait_closed(1s));
  EXPECT_TRUE(idle.wait_closed(1s));
  EXPECT_TRUE(engine_idle());
  EXPECT_EQ(server->connections(), 0u);
}

}  // namespace
}  // namespace gs
