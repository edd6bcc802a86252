// Load and hostile input against the real engine (stories260K, CPU), bounded in time:
// 64 concurrent streaming clients, 512 requests, some hanging up early; then a few hundred
// broken bodies. Nothing is lost, every error is a 4xx object, and all KV blocks come back.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

// Reads one metric's value from /metrics (-1 if absent).
double metric(int port, const std::string& name) {
  std::string m = test::get(port, "/metrics").body;
  size_t at = m.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(m.substr(at + name.size() + 2));
}

TEST(Load, ManyStreamingClientsSomeHangingUp) {
  test::RealServer srv;
  constexpr int kClients = 64, kRequests = 512;
  std::atomic<int> next{0}, completed{0}, cancelled{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(c);
      for (int i; (i = next++) < kRequests;) {
        const int max_tokens = 1 + static_cast<int>(rng() % 24);
        const bool ignore_eos = i % 2 == 0;
        const bool hang_up = i % 7 == 3;
        json body = {{"prompt", "Once upon a time " + std::to_string(i)},
                     {"max_tokens", max_tokens},
                     {"ignore_eos", ignore_eos},
                     {"stream", true},
                     {"seed", i},
                     {"stream_options", {{"include_usage", true}}}};
        auto s = test::post_stream(srv.port(), "/v1/completions", body.dump(), hang_up ? 2 : -1);
        if (hang_up && !s.done) {
          ++cancelled;
          continue;
        }
        // Not cancelled: the last choice chunk has the finish reason, then usage, then [DONE].
        bool ok = s.done && s.events.size() >= 2;
        if (ok) {
          const json& fin = s.events[s.events.size() - 2]["choices"][0];
          const int n = s.events.back()["usage"]["completion_tokens"];
          ok = (fin["finish_reason"] == "length" && n == max_tokens) ||
               (fin["finish_reason"] == "stop" && !ignore_eos && n <= max_tokens);
        }
        if (ok)
          ++completed;
        else if (wrong++ < 5)
          ADD_FAILURE() << "request " << i << ": status " << s.status << " " << s.error << " " << s.raw.substr(0, 2000);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(completed + cancelled, kRequests);
  EXPECT_GT(cancelled.load(), 0);
  // Every engine request ends; every KV block is free again.
  double free_blocks = -1, total = metric(srv.port(), "graphserve_kv_cache_blocks_total");
  for (int i = 0; i < 500; ++i) {
    free_blocks = metric(srv.port(), "graphserve_kv_cache_blocks_free");
    if (free_blocks == total && metric(srv.port(), "graphserve_num_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(total, 0);
  EXPECT_EQ(free_blocks, total);
  EXPECT_EQ(metric(srv.port(), "graphserve_http_requests_in_flight"), 0);
  EXPECT_EQ(test::get(srv.port(), "/health").status, 200);
}

std::vector<std::string> hostile_bodies() {
  std::vector<std::string> b = {"",
                                "{",
                                "}",
                                "[]",
                                "null",
                                "42",
                                "\"str\"",
                                "{\"prompt\":}",
                                "{'prompt': 'x'}",
                                "{\"prompt\":\"x\",}",
                                "{\"prompt\":\"x\"} {}",
                                "\xff\xfe\xfd",
                                "{\"prompt\":\"\xc3\x28\"}",
                                "{\"prompt\":\"\xed\xa0\x80\"}",
                                "{\"prompt\":\"\\ud800\"}",
                                "{\"prompt\":\"x\",\"max_tokens\":1e999}",
                                "{\"prompt\":\"x\",\"max_tokens\":99999999999999999999999}",
                                "{\"prompt\":\"x\",\"temperature\":-1e308}",
                                std::string(100000, '['),
                                "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}",
                                "{\"prompt\":" + std::string(1000, '[') + "1" + std::string(1000, ']') + "}",
                                "{\"prompt\":\"" + std::string(1 << 20, 'x') + "\"}",  // far longer than the context
                                "{\"prompt\":[" + std::string(2000, '1').insert(1, ",") + "]}",
                                "{\"prompt\":\"x\",\"stop\":[" + std::string(100, '1').insert(1, ",") + "]}",
                                "{\"messages\":\"hi\"}",
                                "{\"prompt\":\"x\",\"model\":\"\\u0000\"}"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> fields = {
      {"prompt", {"null", "1", "true", "{}", "[]", "[[]]", "[-1]", "[1.5]", "[100000]", "[\"a\",1]", "\"\""}},
      {"max_tokens", {"0", "-1", "1.5", "\"5\"", "true", "[]", "{}", "1e10", "100000000", "-9223372036854775809"}},
      {"temperature", {"-0.1", "2.5", "\"hot\"", "[]", "1e400", "NaN", "Infinity"}},
      {"top_p", {"0", "-1", "1.1", "\"a\""}},
      {"top_k", {"-2", "0.5", "\"3\""}},
      {"min_p", {"-0.1", "1.5"}},
      {"n", {"0", "-1", "1000", "\"2\"", "1.0"}},
      {"stop", {"1", "[1]", "{}", "[\"\"]", "[null]"}},
      {"seed", {"\"1\"", "1.5", "[]", "1e30"}},
      {"presence_penalty", {"3", "-3", "\"x\""}},
      {"frequency_penalty", {"2.1", "null2"}},
      {"repetition_penalty", {"0", "-1", "11"}},
      {"logprobs", {"-1", "21", "\"5\"", "1.5"}},
      {"ignore_eos", {"1", "\"true\"", "[]"}},
      {"stream", {"1", "\"yes\""}},
      {"stream_options", {"1", "[]", "{\"include_usage\":1}"}},
      {"echo", {"\"true\"", "1"}},
      {"logit_bias", {"1", "[]", "{\"x\":1}", "{\"5\":101}", "{\"99999\":1}"}},
      {"prompt_logprobs", {"-1", "21", "\"2\""}},
      {"model", {"1", "\"gpt-4\"", "[]", "\"\""}},
      {"min_tokens", {"-1", "\"1\""}},
      {"stop_token_ids", {"1", "[-1]", "[\"a\"]"}},
  };
  for (const auto& [key, values] : fields)
    for (const auto& v : values) {
      const std::string prompt = key == "prompt" ? "" : "\"prompt\":\"Once\",";
      b.push_back("{" + prompt + "\"" + key + "\":" + v + "}");
      b.push_back("{" + prompt + "\"stream\":true,\"" + key + "\":" + v + "}");
    }
  const std::vector<std::string> chat = {
      "{}",
      "{\"messages\":[]}",
      "{\"messages\":null}",
      "{\"messages\":[1]}",
      "{\"messages\":[{\"content\":\"x\"}]}",
      "{\"messages\":[{\"role\":1,\"content\":\"x\"}]}",
      "{\"messages\":[{\"role\":\"user\",\"content\":1}]}",
      "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":\"yes\"}",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":0}",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"" + std::string(100000, 'y') + "\"}]}"};
  for (const auto& c : chat) b.push_back("CHAT" + c);
  return b;
}

TEST(Load, HostileBodiesGet4xxAndTheServerKeepsServing) {
  test::RealServer srv;
  const auto bodies = hostile_bodies();
  ASSERT_GT(bodies.size(), 200u);
  for (const std::string& raw : bodies) {
    const bool chat = raw.rfind("CHAT", 0) == 0;
    const std::string body = chat ? raw.substr(4) : raw;
    auto r = test::post(srv.port(), chat ? "/v1/chat/completions" : "/v1/completions", body);
    const std::string shown = body.substr(0, 120);
    EXPECT_GE(r.status, 400) << shown;
    EXPECT_LT(r.status, 500) << shown;
    json j = r.json();
    EXPECT_TRUE(j.is_object() && j["error"].is_object() && j["error"]["message"].is_string() &&
                j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code"))
        << shown << " -> " << r.body.substr(0, 300);
  }
  auto ok = test::post(srv.port(), "/v1/completions", R"({"prompt":"Once","max_tokens":3})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(metric(srv.port(), "graphserve_http_requests_in_flight"), 0);
}

}  // namespace
}  // namespace gs
