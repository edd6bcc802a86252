// Bounded mutation fuzzing (a fixed seed and count, seconds in CI) of the HTTP request parser and
// the JSON request fields, over the fake engine: every mutated request gets an answer that is not
// a 5xx, or its connection closed, and the server still answers /health afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "fake_engine.h"
#include "http_client.h"
#include "raw_socket.h"
#include "server/api_server.h"

namespace gs {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::vector<std::string> kInteresting = {
    "",        "-1",        "0",        "1e308", "-1e308", "99999999999999999999",
    "null",    "true",      "\"\"",     "[]",    "{}",     "[[[[",
    "\\u0000", "\xff\xfe",  "\r\n",     ":",     ",",      "\"x\":",
    "chunked", "0\r\n\r\n", "HTTP/1.1", " "};

// One random edit of `s`: flip, insert, delete, duplicate a span, or splice an interesting token.
void mutate(std::string& s, std::mt19937& rng) {
  auto pos = [&] { return s.empty() ? size_t(0) : size_t(rng() % (s.size() + 1)); };
  switch (rng() % 5) {
    case 0:
      if (!s.empty()) s[rng() % s.size()] ^= char(1u << (rng() % 8));
      break;
    case 1: s.insert(pos(), 1, char(rng() % 256)); break;
    case 2:
      if (!s.empty()) s.erase(rng() % s.size(), 1 + rng() % 8);
      break;
    case 3:
      if (!s.empty()) {
        const size_t b = rng() % s.size();
        s.insert(pos(), s.substr(b, 1 + rng() % 32));
      }
      break;
    default: s.insert(pos(), kInteresting[rng() % kInteresting.size()]); break;
  }
}

class Fuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig cfg;
    cfg.port = 0;
    cfg.max_body_bytes = 1u << 16;
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
    port = server->port();
  }
  test::FakeEngine engine;
  std::unique_ptr<ApiServer> server;
  int port = 0;
};

// The status code of a raw HTTP answer, or 0 for none.
int status_of(const std::string& answer) {
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

TEST_F(Fuzz, HttpRequestParser) {
  const std::string body = R"({"prompt":"ab","max_tokens":2})";
  const std::vector<std::string> seeds = {
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n" + body,
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" +
          fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body),
  };
  std::mt19937 rng(34);
  int answered = 0;
  for (int i = 0; i < 600; ++i) {
    std::string req = seeds[size_t(i) % seeds.size()];
    for (int k = 1 + int(rng() % 4); k > 0; --k) mutate(req, rng);
    test::RawSocket s(port);
    ASSERT_TRUE(s.ok());
    s.send(req);
    s.shutdown_write();  // a truncated request ends here instead of waiting for the body deadline
    const std::string answer = s.read(3s);
    const int status = status_of(answer);
    EXPECT_TRUE(status == 0 || status < 500 || status == 501 || status == 503) << status << " for:\n" << req;
    answered += status != 0;
  }
  EXPECT_GT(answered, 300);  // most mutations still reach the parser's verdict
  EXPECT_EQ(test::get(port, "/health").status, 200);
}

// Each field of a valid body replaced by a value of another type or an extreme one, then the
// whole text mutated: never a 5xx.
TEST_F(Fuzz, JsonRequestFields) {
  const json base = {{"model", "fake"},
                     {"prompt", "ab"},
                     {"max_tokens", 3},
                     {"temperature", 0.5},
                     {"top_p", 0.9},
                     {"top_k", 5},
                     {"n", 2},
                     {"stop", {"x"}},
                     {"logprobs", 2},
                     {"echo", false},
                     {"seed", 7},
                     {"logit_bias", {{"97", 1}}},
                     {"stream", false},
                     {"min_tokens", 1},
                     {"ignore_eos", true},
                     {"stop_token_ids", {98}},
                     {"presence_penalty", 0.1}};
  const std::vector<json> values = {
      nullptr,        -1,     0,          1e308, -1e308, int64_t(1) << 62,      "s", json::array(),
      json::object(), {1, 2}, {{"a", 1}}, true,  1.5,    std::string(3000, 'q')};
  std::mt19937 rng(3434);
  for (int i = 0; i < 700; ++i) {
    json body = base;
    auto it = body.begin();
    std::advance(it, rng() % body.size());
    it.value() = values[rng() % values.size()];
    std::string text = body.dump();
    if (i % 2) mutate(text, rng);
    const char* path = i % 3 == 0 ? "/v1/chat/completions" : "/v1/completions";
    if (i % 3 == 0) {
      json chat = body;
      chat.erase("prompt");
      chat["messages"] = {{{"role", "user"}, {"content", "hi"}}};
      text = chat.dump();
    }
    const auto r = test::post(port, path, text);
    EXPECT_NE(r.status, 0) << text;
    EXPECT_LT(r.status, 500) << text << " -> " << r.body;
  }
  EXPECT_EQ(test::get(port, "/health").status, 200);
}

}  // namespace
}  // namespace gs
