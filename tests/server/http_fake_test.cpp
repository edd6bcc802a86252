// The HTTP layer over a fake engine: response shapes, streaming, errors, limits, disconnects.
#include <gtest/gtest.h>

#include <thread>

#include "bench/serve_bench.h"
#include "fake_engine.h"
#include "http_client.h"
#include "server/api_server.h"

namespace gs {
namespace {

using nlohmann::json;
using test::get;
using test::post;
using test::post_stream;

class HttpFake : public ::testing::Test {
 protected:
  void start(ServerConfig cfg = {}) {
    cfg.port = 0;
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
    port = server->port();
  }
  void SetUp() override { start(); }
  // Waits (bounded) until the fake engine holds no request.
  bool engine_idle() {
    for (int i = 0; i < 500 && (engine.live() > 0 || server->in_flight() > 0); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return engine.live() == 0 && server->in_flight() == 0;
  }
  test::FakeEngine engine;
  std::unique_ptr<ApiServer> server;
  int port = 0;
};

TEST_F(HttpFake, CompletionNonStreaming) {
  auto r = post(port, "/v1/completions", R"({"model":"fake","prompt":"hi","max_tokens":4})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_GT(j["created"].get<int64_t>(), 1600000000);
  EXPECT_EQ(j["model"], "fake");
  EXPECT_EQ(j["choices"][0]["text"], "abcd");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 2}, {"completion_tokens", 4}, {"total_tokens", 6}}));
}

TEST_F(HttpFake, StopFinishReasonAndSeveralChoices) {
  auto r = post(port, "/v1/completions", R"({"prompt":["Sx","yy"],"n":2,"max_tokens":5})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][3]["text"], "abcde");
  EXPECT_EQ(j["choices"][3]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3 + 3 + 5 + 5);
}

TEST_F(HttpFake, CompletionStreamingWithUsage) {
  auto s = post_stream(port, "/v1/completions",
                       R"({"prompt":"hi","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  ASSERT_EQ(s.events.size(), 4u) << s.raw;
  std::string text;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.events[i]["object"], "text_completion");
    text += s.events[i]["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(s.events[i]["choices"][0]["finish_reason"].is_null(), i < 2);
  }
  EXPECT_EQ(text, "abc");
  EXPECT_EQ(s.events[2]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(s.events[3]["choices"].empty());
  EXPECT_EQ(s.events[3]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(s.raw.substr(s.raw.size() - 14), "data: [DONE]\n\n");
}

// Every step that produced a token is streamed, even when its text is empty, so a client's
// time to first token and inter-token latency see every step.
TEST_F(HttpFake, TokensWithoutTextAreStreamedToo) {
  auto s = post_stream(port, "/v1/completions", R"({"prompt":"Empty","max_tokens":3,"stream":true})");
  ASSERT_EQ(s.status, 200);
  ASSERT_EQ(s.events.size(), 3u) << s.raw;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.events[i]["choices"][0]["text"], "") << s.raw;
  EXPECT_EQ(s.events[2]["choices"][0]["finish_reason"], "length");
}

TEST_F(HttpFake, CompletionLogprobs) {
  auto r = post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":2,"logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  json lp = r.json()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.5}));
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
  EXPECT_EQ(lp["top_logprobs"][1], json({{"b", -0.5}}));
}

TEST_F(HttpFake, ChatStreamingShapes) {
  server.reset();
  ServerConfig cfg;
  cfg.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  start(cfg);
  auto s = post_stream(
      port, "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":2,"stream":true,"logprobs":true,"top_logprobs":1})");
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.done);
  ASSERT_EQ(s.events.size(), 3u) << s.raw;
  EXPECT_EQ(s.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(s.events[1]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(s.events[1]["choices"][0]["logprobs"]["content"][0]["token"], "a");
  EXPECT_EQ(s.events[2]["choices"][0]["finish_reason"], "length");
  auto r = post(port, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["object"], "chat.completion");
  EXPECT_EQ(r.json()["choices"][0]["message"], json({{"role", "assistant"}, {"content", "ab"}}));
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], 5);
}

TEST_F(HttpFake, ChatWithoutTemplateIs400) {
  auto r = post(port, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["code"], "no_chat_template");
}

TEST_F(HttpFake, ModelsHealthTokenize) {
  EXPECT_EQ(get(port, "/health").status, 200);
  auto m = get(port, "/v1/models").json();
  EXPECT_EQ(m["data"][0]["id"], "fake");
  auto t = post(port, "/tokenize", R"({"prompt":"ab"})").json();
  EXPECT_EQ(t["tokens"], json({97, 98}));
  EXPECT_EQ(t["count"], 2);
  EXPECT_EQ(post(port, "/detokenize", R"({"tokens":[104,105]})").json()["prompt"], "hi");
  EXPECT_EQ(post(port, "/detokenize", R"({"tokens":[100000]})").status, 400);
  auto nf = get(port, "/nope");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(nf.json()["error"].is_object());
}

TEST_F(HttpFake, AFailedEngineIsUnhealthyAndRefusesRequestsWith503) {
  engine.fatal_error = "tensor-parallel worker rank 1 closed its connection";
  const auto h = get(port, "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_NE(h.body.find("worker rank 1"), std::string::npos) << h.body;
  const auto r = post(port, "/v1/completions", R"({"prompt":"hi"})");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("worker rank 1"), std::string::npos);
  EXPECT_NE(get(port, "/metrics").body.find("graphserve_engine_healthy 0"), std::string::npos);
}

TEST_F(HttpFake, EngineRefusalIs400) {
  auto r = post(port, "/v1/completions", R"({"prompt":"hi","temperature":1.5})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("1.5"), std::string::npos);
}

TEST_F(HttpFake, ApiKey) {
  server.reset();
  ServerConfig cfg;
  cfg.api_key = "sekret";
  start(cfg);
  auto r = post(port, "/v1/completions", R"({"prompt":"hi"})");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.json()["error"]["type"], "authentication_error");
  EXPECT_EQ(post(port, "/v1/completions", R"({"prompt":"hi"})", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(port, "/v1/completions", R"({"prompt":"hi"})", {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(get(port, "/health").status, 200);
}

TEST_F(HttpFake, FullQueueIs503AndBodyLimitIs413) {
  server.reset();
  ServerConfig cfg;
  cfg.max_waiting_requests = 4;
  cfg.max_body_bytes = 1000;
  start(cfg);
  engine.waiting = 4;
  auto r = post(port, "/v1/completions", R"({"prompt":"hi"})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.json()["error"]["type"], "service_unavailable");
  engine.waiting = 0;
  EXPECT_EQ(post(port, "/v1/completions", R"({"prompt":"hi"})").status, 200);
  auto big = post(port, "/v1/completions", R"({"prompt":")" + std::string(5000, 'x') + "\"}");
  EXPECT_EQ(big.status, 413);
  EXPECT_TRUE(big.json()["error"].is_object());
}

TEST_F(HttpFake, TooManyTokensForTheContextIs400) {
  auto r = post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":100000000,"stream":true})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(r.json()["error"]["param"], "max_tokens");
}

TEST_F(HttpFake, DisconnectBeforeTheEndAbortsIt) {
  auto s = post_stream(port, "/v1/completions", R"({"prompt":"hi","max_tokens":120,"stream":true})", 2);
  EXPECT_FALSE(s.done);
  ASSERT_TRUE(engine_idle());
  EXPECT_EQ(engine.aborted.load(), 1);
  std::string metrics = get(port, "/metrics").body;
  EXPECT_NE(metrics.find("graphserve_request_success_total{finished_reason=\"abort\"} 1"), std::string::npos)
      << metrics;
}

TEST_F(HttpFake, GracefulShutdownFinishesInFlightRequests) {
  std::thread client([&] {
    auto r = post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":100})");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "length");
  });
  for (int i = 0; i < 200 && server->in_flight() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(server->shutdown(std::chrono::seconds(20)));
  client.join();
}

TEST_F(HttpFake, MetricsExposition) {
  ASSERT_EQ(post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":3})").status, 200);
  std::string m = get(port, "/metrics").body;
  for (const char* want :
       {"graphserve_request_success_total{finished_reason=\"length\"} 1", "graphserve_generation_tokens_total 3",
        "graphserve_prompt_tokens_total 2", "graphserve_time_to_first_token_seconds_count 1",
        "graphserve_inter_token_latency_seconds_count 2", "graphserve_e2e_request_latency_seconds_count 1",
        "graphserve_kv_cache_blocks_free 1000", "graphserve_forward_steps_total{mode=\"FULL\"} 0",
        "graphserve_graph_captures_after_startup_total 0"})
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
}

TEST_F(HttpFake, MetricsUnderVllmNamesWithModelName) {
  ASSERT_EQ(post(port, "/v1/completions", R"({"prompt":"hi","max_tokens":3})").status, 200);
  std::string m = get(port, "/metrics").body;
  for (const char* want :
       {"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"fake\"} 0",
        "vllm:num_requests_waiting{model_name=\"fake\"} 0", "vllm:kv_cache_usage_perc{model_name=\"fake\"} 0",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        "vllm:time_to_first_token_seconds_count{model_name=\"fake\"} 1",
        "vllm:inter_token_latency_seconds_count{model_name=\"fake\"} 2",
        "vllm:e2e_request_latency_seconds_bucket{model_name=\"fake\",le=\"+Inf\"} 1",
        "vllm:request_decode_time_seconds_count{model_name=\"fake\"} 1",
        "vllm:request_queue_time_seconds_sum{model_name=\"fake\"} 0.25",
        "vllm:request_prefill_time_seconds_sum{model_name=\"fake\"} 0.5",
        "vllm:request_success_total{model_name=\"fake\",finished_reason=\"length\"} 1",
        "# TYPE vllm:prompt_tokens_total counter", "vllm:prefix_cache_hits_total{model_name=\"fake\"}"})
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
}

}  // namespace
}  // namespace gs

namespace gs {
namespace {

using nlohmann::json;

TEST_F(HttpFake, BenchServeMeasuresEveryRequest) {
  ServeBenchConfig cfg;
  cfg.base_url = "http://127.0.0.1:" + std::to_string(port);
  cfg.num_prompts = 12;
  cfg.input_len = 4;
  cfg.output_len = 5;
  cfg.max_concurrency = 4;
  ServeBenchResult r = run_serve_bench(cfg);
  json s = r.summary();
  EXPECT_EQ(s["model"], "fake");
  EXPECT_EQ(s["completed"], 12) << s.dump();
  EXPECT_EQ(s["total_output_tokens"], 12 * 5);
  EXPECT_EQ(s["total_input_tokens"].get<int>(), 12 * 4);  // prompts of exactly 4 tokens (from /tokenize)
  EXPECT_EQ(s["mean_ttft_ms"], s["ttft_ms"]["mean"]);     // vLLM's flat keys
  EXPECT_EQ(s["p99_itl_ms"], s["itl_ms"]["p99"]);
  for (const auto& q : r.requests) EXPECT_EQ(q.itl.size(), 4u);
  EXPECT_GT(s["ttft_ms"]["p99"].get<double>(), 0.0);
  EXPECT_GE(s["tpot_ms"]["p90"].get<double>(), s["tpot_ms"]["median"].get<double>());
  EXPECT_EQ(s["sampling"], (json{{"temperature", 0}}));
  // The sampling fields reach the server in every request (the fake refuses temperature 1.5).
  cfg.num_prompts = 3;
  cfg.sampling = {{"temperature", 1.5}, {"top_p", 0.9}};
  s = run_serve_bench(cfg).summary();
  EXPECT_EQ(s["failed"], 3) << s.dump();
  EXPECT_NE(s.value("first_error", std::string()).find("temperature 1.5"), std::string::npos) << s.dump();
  EXPECT_EQ(s["sampling"]["top_p"], 0.9);
}

TEST_F(HttpFake, BenchServeChatEndpointAndServerErrors) {
  server.reset();
  ServerConfig scfg;
  scfg.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  start(scfg);
  ServeBenchConfig cfg;
  cfg.base_url = "http://127.0.0.1:" + std::to_string(port);
  cfg.endpoint = "/v1/chat/completions";
  cfg.num_prompts = 4;
  cfg.input_len = 3;
  cfg.output_len = 5;
  json s = run_serve_bench(cfg).summary();
  EXPECT_EQ(s["completed"], 4) << s.dump();
  EXPECT_EQ(s["total_output_tokens"], 4 * 5);
  cfg.output_len = 1000;  // longer than the context: the server's 400 is kept in the report
  s = run_serve_bench(cfg).summary();
  EXPECT_EQ(s["failed"], 4);
  ASSERT_TRUE(s.contains("errors")) << s.dump();
  EXPECT_NE(s["errors"][0].get<std::string>().find("context length"), std::string::npos) << s.dump();
}

}  // namespace
}  // namespace gs
