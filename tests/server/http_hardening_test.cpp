// HTTP framing the server does not do is refused as nginx refuses it (an unknown transfer coding
// 501, a content coding 415, HTTP/1.1 without Host 400); HEAD answers GET routes with their
// headers and no body; the Bearer scheme is case-insensitive. Over the fake engine.
#include <gtest/gtest.h>

#include <chrono>

#include "fake_engine.h"
#include "http_client.h"
#include "raw_socket.h"
#include "server/api_server.h"

namespace gs {
namespace {

using namespace std::chrono_literals;

class HttpHardening : public ::testing::Test {
 protected:
  void start(ServerConfig cfg = {}) {
    cfg.port = 0;
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
    port = server->port();
  }
  // The raw answer to `request` on a fresh connection.
  std::string ask(const std::string& request) {
    test::RawSocket s(port);
    s.send(request);
    return s.read(3s, "}");
  }
  test::FakeEngine engine;
  std::unique_ptr<ApiServer> server;
  int port = 0;
};

std::string post_with(const std::string& headers, const std::string& body = R"({"prompt":"ab"})") {
  return "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(HttpHardening, TransferAndContentCodings) {
  start();
  const std::string body = R"({"prompt":"ab"})";
  const std::string chunked = fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body);
  std::string r = ask("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked);
  EXPECT_EQ(r.rfind("HTTP/1.1 501", 0), 0u) << r;
  EXPECT_NE(r.find("Transfer-Encoding"), std::string::npos) << r;
  r = ask("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n" + chunked);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;  // the coding's name is case-insensitive
  r = ask(post_with("Content-Encoding: gzip\r\n"));
  EXPECT_EQ(r.rfind("HTTP/1.1 415", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Encoding"), std::string::npos) << r;
  r = ask(post_with("Content-Encoding: identity\r\n"));
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST_F(HttpHardening, Http11NeedsHost) {
  start();
  std::string r = ask("GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_NE(r.find("Host"), std::string::npos) << r;
  r = ask("GET /health HTTP/1.0\r\n\r\n");  // HTTP/1.0 has no Host requirement
  EXPECT_EQ(r.rfind("HTTP/1.0 200", 0), 0u) << r;
}

TEST_F(HttpHardening, HeadAnswersGetRoutesWithoutBody) {
  start();
  for (const char* path : {"/health", "/v1/models", "/metrics"}) {
    test::RawSocket s(port);
    s.send(fmt::format(
        "HEAD {} HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path));
    const std::string all = s.read(3s);  // until the server closes after the second answer
    const size_t second = all.find("HTTP/1.1", 1);
    ASSERT_NE(second, std::string::npos) << path << ": " << all;
    const std::string head = all.substr(0, second);
    EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
    EXPECT_NE(head.find("Content-Length: "), std::string::npos) << head;
    EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;  // no body before the next answer
    EXPECT_EQ(all.substr(second).rfind("HTTP/1.1 200", 0), 0u) << all;
  }
  const std::string r = ask("HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
}

TEST_F(HttpHardening, BearerSchemeIsCaseInsensitive) {
  ServerConfig cfg;
  cfg.api_key = "k3y";
  start(cfg);
  const std::string body = R"({"prompt":"ab"})";
  for (const char* auth : {"Bearer k3y", "bearer k3y", "BEARER k3y", "Bearer  k3y"})
    EXPECT_EQ(test::post(port, "/tokenize", body, {{"Authorization", auth}}).status, 200) << auth;
  for (const char* auth : {"Bearer k3", "Basic k3y", "Bearerk3y", "Bearer ", "k3y"})
    EXPECT_EQ(test::post(port, "/tokenize", body, {{"Authorization", auth}}).status, 401) << auth;
}

}  // namespace
}  // namespace gs
