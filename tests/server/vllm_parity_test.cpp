// The endpoints and fields vLLM clients use beyond chat and completions, on the real engine
// (stories260K, CPU): /version, /ping, /v1/models/{id}, stream_options.continuous_usage_stats,
// the vllm:* metrics dashboards read, and the Responses API (streamed and not, instructions,
// input items, previous_response_id, the store switched off), each checked against the
// equivalent chat completion.
#include <gtest/gtest.h>

#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

class Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { srv = new test::RealServer(); }
  static void TearDownTestSuite() { delete srv; }
  static test::RealServer* srv;
  static int port() { return srv->port(); }
};
test::RealServer* Parity::srv = nullptr;

std::string chat_text(int port, const json& messages, int max_tokens) {
  auto r = test::post(port, "/v1/chat/completions",
                      json{{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json()["choices"][0]["message"]["content"];
}

// Responses API events: (type, data) in order.
std::vector<json> response_events(int port, const json& body) {
  auto cli = test::make_client(port);
  auto r = cli.Post("/v1/responses", body.dump(), "application/json");
  std::vector<json> events;
  if (!r) return events;
  EXPECT_EQ(r->status, 200) << r->body;
  size_t start = 0, end;
  while ((end = r->body.find("\n\n", start)) != std::string::npos) {
    const std::string block = r->body.substr(start, end - start);
    start = end + 2;
    const size_t ev = block.find("event: "), data = block.find("data: ");
    if (ev != 0 || data == std::string::npos) {
      ADD_FAILURE() << "not an 'event:' + 'data:' block: " << block;
      continue;
    }
    json j = json::parse(block.substr(data + 6), nullptr, false);
    EXPECT_EQ(block.substr(7, block.find('\n') - 7), j.value("type", "")) << block;
    events.push_back(std::move(j));
  }
  return events;
}

TEST_F(Parity, VersionPingAndOneModel) {
  auto v = test::get(port(), "/version");
  ASSERT_EQ(v.status, 200);
  EXPECT_TRUE(v.json()["version"].is_string()) << v.body;
  EXPECT_EQ(test::get(port(), "/ping").status, 200);
  EXPECT_EQ(test::post(port(), "/ping", "").status, 200);
  auto m = test::get(port(), "/v1/models/stories260K");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.json()["id"], "stories260K");
  EXPECT_EQ(m.json()["object"], "model");
  auto missing = test::get(port(), "/v1/models/nope");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_NE(missing.body.find("nope"), std::string::npos);
}

TEST_F(Parity, ContinuousUsageStatsOnEveryChunk) {
  auto s = test::post_stream(port(), "/v1/completions",
                             R"({"prompt":"Once upon a time","max_tokens":6,"temperature":0,"ignore_eos":true,
                                 "stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}})");
  ASSERT_TRUE(s.done) << s.raw;
  int last = -1, with_choices = 0;
  for (const json& e : s.events) {
    ASSERT_TRUE(e.contains("usage")) << e.dump();
    const int done = e["usage"]["completion_tokens"];
    EXPECT_GE(done, last);
    last = done;
    if (!e["choices"].empty()) ++with_choices;
    EXPECT_EQ(e["usage"]["total_tokens"], e["usage"]["prompt_tokens"].get<int>() + done);
  }
  EXPECT_GE(with_choices, 1);
  EXPECT_EQ(last, 6);
  // Without it, only the final usage chunk carries usage.
  auto plain = test::post_stream(port(), "/v1/completions",
                                 R"({"prompt":"Once","max_tokens":3,"temperature":0,"stream":true,
                                     "stream_options":{"include_usage":true}})");
  ASSERT_TRUE(plain.done);
  ASSERT_GE(plain.events.size(), 2u);
  EXPECT_FALSE(plain.events.front().contains("usage"));
}

TEST_F(Parity, MetricsDashboardsRead) {
  ASSERT_EQ(
      test::post(port(), "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0})").status,
      200);
  const std::string m = test::get(port(), "/metrics").body;
  for (const char* name :
       {"vllm:time_per_output_token_seconds_bucket", "vllm:request_prompt_tokens_count",
        "vllm:request_generation_tokens_sum", "vllm:iteration_tokens_total_count", "vllm:cache_config_info{"})
    EXPECT_NE(m.find(name), std::string::npos) << name;
  EXPECT_NE(m.find("block_size=\"16\""), std::string::npos);
  EXPECT_NE(m.find("# TYPE vllm:iteration_tokens_total histogram"), std::string::npos);
  EXPECT_EQ(m.find("vllm:iteration_tokens_total_count{model_name=\"stories260K\"} 0\n"), std::string::npos);
}

TEST_F(Parity, ResponsesEqualsTheChatCompletion) {
  const json body = {{"input", "Tell me a story"}, {"max_output_tokens", 10}, {"temperature", 0}};
  auto r = test::post(port(), "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["usage"]["output_tokens"], 10);
  EXPECT_EQ(j["max_output_tokens"], 10);
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["role"], "assistant");
  const std::string text = j["output"][0]["content"][0]["text"];
  EXPECT_EQ(text, chat_text(port(), json::array({{{"role", "user"}, {"content", "Tell me a story"}}}), 10));

  // Streamed: the documented event order, deltas adding up to the same text.
  json sbody = body;
  sbody["stream"] = true;
  const std::vector<json> events = response_events(port(), sbody);
  ASSERT_GE(events.size(), 9u);
  EXPECT_EQ(events[0]["type"], "response.created");
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events[2]["type"], "response.output_item.added");
  EXPECT_EQ(events[3]["type"], "response.content_part.added");
  std::string deltas;
  for (size_t i = 4; i + 4 < events.size(); ++i) {
    EXPECT_EQ(events[i]["type"], "response.output_text.delta");
    deltas += events[i]["delta"].get<std::string>();
  }
  const size_t n = events.size();
  EXPECT_EQ(events[n - 4]["type"], "response.output_text.done");
  EXPECT_EQ(events[n - 3]["type"], "response.content_part.done");
  EXPECT_EQ(events[n - 2]["type"], "response.output_item.done");
  EXPECT_EQ(events[n - 1]["type"], "response.completed");
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(events[i]["sequence_number"], i);
  EXPECT_EQ(deltas, text);
  EXPECT_EQ(events[n - 4]["text"], text);
  EXPECT_EQ(events[n - 1]["response"]["output"][0]["content"][0]["text"], text);
  EXPECT_EQ(events[n - 1]["response"]["usage"]["output_tokens"], 10);
}

TEST_F(Parity, ResponsesInstructionsItemsAndPreviousResponse) {
  const json first = {{"instructions", "Be kind."},
                      {"input", json::array({{{"type", "message"},
                                              {"role", "user"},
                                              {"content", json::array({{{"type", "input_text"}, {"text", "Hi"}}})}}})},
                      {"max_output_tokens", 6},
                      {"temperature", 0}};
  auto r1 = test::post(port(), "/v1/responses", first.dump());
  ASSERT_EQ(r1.status, 200) << r1.body;
  const std::string t1 = r1.json()["output"][0]["content"][0]["text"];
  EXPECT_EQ(
      t1, chat_text(port(),
                    json::array({{{"role", "system"}, {"content", "Be kind."}}, {{"role", "user"}, {"content", "Hi"}}}),
                    6));
  EXPECT_EQ(r1.json()["instructions"], "Be kind.");

  // The follow-up continues the stored conversation (instructions are not carried over).
  const std::string id = r1.json()["id"];
  auto r2 = test::post(
      port(), "/v1/responses",
      json{{"previous_response_id", id}, {"input", "More"}, {"max_output_tokens", 6}, {"temperature", 0}}.dump());
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(r2.json()["previous_response_id"], id);
  EXPECT_EQ(r2.json()["output"][0]["content"][0]["text"],
            chat_text(port(),
                      json::array({{{"role", "user"}, {"content", "Hi"}},
                                   {{"role", "assistant"}, {"content", t1}},
                                   {{"role", "user"}, {"content", "More"}}}),
                      6));
  auto stored = test::get(port(), "/v1/responses/" + id);
  ASSERT_EQ(stored.status, 200) << stored.body;
  EXPECT_EQ(stored.json()["id"], id);

  auto unknown = test::post(port(), "/v1/responses", R"({"previous_response_id":"resp_nope","input":"x"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("resp_nope"), std::string::npos);
}

TEST_F(Parity, ResponsesRefusesWhatItCannotServe) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input":"x","tools":[{"type":"function","name":"f","parameters":{}}]})", "tools"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]})", "input_image"},
      {R"({"input":[{"type":"function_call_output","call_id":"c","output":"1"}]})", "function_call_output"},
      {R"({"input":"x","text":{"format":{"type":"json_object"}}})", "text.format"},
      {R"({"instructions":"x"})", "input"},
      {R"({"input":"x","max_output_tokens":0})", "max_tokens"},
  };
  for (const auto& [body, fragment] : cases) {
    auto r = test::post(port(), "/v1/responses", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(r.body.find(fragment), std::string::npos) << r.body;
  }
}

TEST_F(Parity, PreviousResponseWithTheStoreOffIsA400) {
  ServerConfig cfg;
  cfg.port = 0;
  cfg.max_stored_responses = 0;
  ApiServer no_store(srv->engine, cfg);
  no_store.start();
  auto r = test::post(no_store.port(), "/v1/responses", R"({"previous_response_id":"resp_x","input":"x"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("--max-stored-responses"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace gs
