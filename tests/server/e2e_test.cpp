// The real engine behind the HTTP API (stories260K, CPU): outputs equal offline ones, curl and
// streaming work, and the OpenAI Node SDK (when installed in tests/server/node) is happy.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

class E2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { srv = new test::RealServer(); }
  static void TearDownTestSuite() { delete srv; }
  static test::RealServer* srv;
};
test::RealServer* E2E::srv = nullptr;

std::string run_command(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int status = pclose(f);
  if (rc) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(E2E, GreedyAndSeededOutputsEqualOffline) {
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 24;
  auto r =
      test::post(srv->port(), "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":24,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], test::offline_text("Once upon a time", greedy));

  SamplingParams seeded;
  seeded.temperature = 0.9f;
  seeded.top_p = 0.95f;
  seeded.seed = 1234;
  seeded.max_tokens = 30;
  auto s = test::post_stream(
      srv->port(), "/v1/completions",
      R"({"prompt":"The cat","max_tokens":30,"temperature":0.9,"top_p":0.95,"seed":1234,"stream":true})");
  ASSERT_TRUE(s.done) << s.raw;
  std::string text;
  for (const json& e : s.events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, test::offline_text("The cat", seeded));
}

// logprobs token strings and bytes rebuild the returned text exactly (leading spaces, byte
// tokens of a character split over several tokens); echo puts the prompt first, with its
// tokens' logprobs; prompt_logprobs gives vLLM's list; logit_bias steers the draw.
TEST_F(E2E, LogprobsEchoPromptLogprobsAndLogitBias) {
  auto r = test::post(srv->port(), "/v1/completions",
                      R"({"prompt":"Once upon a time","max_tokens":40,"temperature":1.0,"seed":3,"logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.json()["choices"][0];
  const std::string text = choice["text"];
  std::string rebuilt;  // token strings, with "bytes:\xNN..." turned back into their bytes
  for (const json& t : choice["logprobs"]["tokens"]) {
    const std::string s = t;
    if (s.rfind("bytes:", 0) != 0) {
      rebuilt += s;
      continue;
    }
    for (size_t i = 6; i + 3 < s.size() + 1; i += 4) rebuilt += char(std::stoi(s.substr(i + 2, 2), nullptr, 16));
  }
  EXPECT_EQ(rebuilt, text);
  const json& offsets = choice["logprobs"]["text_offset"];
  ASSERT_EQ(offsets.size(), choice["logprobs"]["tokens"].size());
  EXPECT_EQ(offsets[0], 0);

  auto e = test::post(
      srv->port(), "/v1/completions",
      R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true,"logprobs":1,"prompt_logprobs":2})");
  ASSERT_EQ(e.status, 200) << e.body;
  const json ec = e.json()["choices"][0];
  EXPECT_EQ(ec["text"].get<std::string>().rfind("Once upon a time", 0), 0u) << ec["text"];
  const json& lp = ec["logprobs"];
  const size_t prompt_len = ec["prompt_logprobs"].size();
  ASSERT_GT(prompt_len, 1u);
  EXPECT_TRUE(ec["prompt_logprobs"][0].is_null());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  ASSERT_EQ(lp["tokens"].size(), prompt_len + 4);
  for (size_t i = 1; i < prompt_len; ++i) EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);

  // A bias of +100 on one token makes it every sampled token.
  auto b = test::post(srv->port(), "/v1/completions",
                      R"({"prompt":[1, 403],"max_tokens":5,"temperature":1.0,"seed":9,"logit_bias":{"300":100}})");
  ASSERT_EQ(b.status, 200) << b.body;
  auto d = test::post(srv->port(), "/detokenize", R"({"tokens":[300, 300, 300, 300, 300]})");
  ASSERT_EQ(d.status, 200) << d.body;
  auto trim = [](std::string t) { return t.erase(0, t.find_first_not_of(' ')); };  // the first token's space
  EXPECT_EQ(trim(b.json()["choices"][0]["text"]), trim(d.json()["prompt"]));
  auto bad = test::post(srv->port(), "/v1/completions", R"({"prompt":"x","logit_bias":{"300":"a lot"}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("logit_bias"), std::string::npos) << bad.body;
}

TEST_F(E2E, ChatThroughTheTemplateEqualsOfflinePrompt) {
  auto r = test::post(
      srv->port(), "/v1/chat/completions",
      R"({"model":"stories260K","messages":[{"role":"user","content":"Tell a story"}],"max_tokens":16,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 16;
  // The template writes <s> itself; the offline prompt adds it through the tokenizer.
  EXPECT_EQ(j["choices"][0]["message"]["content"], test::offline_text("user: Tell a story\nassistant:", greedy));
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
}

TEST_F(E2E, Curl) {
  std::string base = "http://127.0.0.1:" + std::to_string(srv->port());
  int rc = -1;
  std::string out = run_command("curl -sS -m 30 " + base +
                                    "/v1/completions -H 'Content-Type: application/json' "
                                    "-d '{\"prompt\":\"Once\",\"max_tokens\":5,\"temperature\":0}'",
                                &rc);
  ASSERT_EQ(rc, 0) << out;
  json j = json::parse(out, nullptr, false);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5) << out;
  out = run_command("curl -sS -N -m 30 " + base +
                        "/v1/chat/completions -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                        "\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true}}'",
                    &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"role\":\"assistant\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"completion_tokens\":4"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 14), "data: [DONE]\n\n");
  out = run_command("curl -sS -m 30 -o /dev/null -w '%{http_code}' " + base + "/v1/completions -d '{\"prompt\": 5}'",
                    &rc);
  EXPECT_EQ(out, "400");
}

TEST_F(E2E, OpenAINodeSdk) {
  namespace fs = std::filesystem;
  const fs::path dir = gs::test::source_dir() / "tests" / "server" / "node";
  if (!fs::exists(dir / "node_modules" / "openai"))
    GTEST_SKIP() << "the openai npm package is not installed: run `npm ci` in " << dir;
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 12;
  const std::string expected = test::offline_text("Once upon a time", greedy);
  EngineConfig pooling_cfg = test::stories_config();
  pooling_cfg.runner = "pooling";
  EngineLoop pooling_engine(std::make_unique<LLMEngine>(pooling_cfg));
  ServerConfig pooling_server_cfg;
  pooling_server_cfg.port = 0;
  ApiServer pooling_server(pooling_engine, pooling_server_cfg);
  pooling_server.start();
  int rc = -1;
  std::string out = run_command("timeout 60 node " + (dir / "openai_sdk_test.mjs").string() + " " +
                                    std::to_string(srv->port()) + " " + std::to_string(pooling_server.port()) + " 2>&1",
                                &rc);
  EXPECT_EQ(rc, 0) << out;
  json j = json::parse(out.substr(out.rfind('\n', out.size() - 2) + 1), nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["completion"], expected) << out;
  EXPECT_EQ(j["completion_stream"], expected) << out;
  EXPECT_EQ(j["chat_stream"], j["chat"]) << out;
  EXPECT_EQ(j["chat_finish"], "length") << out;
  EXPECT_EQ(j["chat_usage"], 8) << out;
  EXPECT_EQ(j["completion_usage"], 12) << out;
  EXPECT_EQ(j["bad_status"], 400) << out;
  EXPECT_EQ(j["retrieved"], "stories260K") << out;
  EXPECT_EQ(j["response_status"], "incomplete") << out;  // cut by max_output_tokens
  EXPECT_EQ(j["response_output_tokens"], 8) << out;
  EXPECT_FALSE(j["response_text"].get<std::string>().empty()) << out;
  EXPECT_EQ(j["response_stream"], j["response_text"]) << out;
  EXPECT_EQ(j["response_stream_completed"], j["response_text"]) << out;
  EXPECT_EQ(j["followup_status"], "incomplete") << out;
  EXPECT_EQ(j["embedding_count"], 2) << out;
  EXPECT_EQ(j["embedding_dim"], 64) << out;  // stories260K's hidden size
  EXPECT_NEAR(j["embedding_norm"].get<double>(), 1.0, 1e-5) << out;
  EXPECT_LT(j["embedding_b64_vs_float"].get<double>(), 1e-6) << out;
  // A named tool_choice: the call, whole and streamed (greedy, so the same arguments).
  EXPECT_EQ(j["tool_name"], "get_weather") << out;
  EXPECT_EQ(j["tool_stream_name"], "get_weather") << out;
  EXPECT_EQ(j["tool_stream_arguments"], j["tool_arguments"]) << out;
  if (j["tool_finish"] == "stop") {
    json args = json::parse(j["tool_arguments"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(args.is_object() && (args["unit"] == "c" || args["unit"] == "f")) << out;
  }
  // tool_choice "required" (greedy, kept off whitespace by logit_bias): a whole call of the tool
  // whose arguments validate; the result goes back for an answer; the SDK's stream helper
  // assembles the same call from its opening chunk and several argument fragments.
  EXPECT_EQ(j["required_name"], "get_weather") << out;
  EXPECT_EQ(j["required_finish"], "tool_calls") << out;
  json args = json::parse(j["required_arguments"].get<std::string>(), nullptr, false);
  EXPECT_TRUE(args.is_object() && (args["unit"] == "c" || args["unit"] == "f")) << out;
  EXPECT_EQ(j["round_trip_role"], "assistant") << out;
  EXPECT_TRUE(j["round_trip_finish"] == "stop" || j["round_trip_finish"] == "length") << out;
  EXPECT_EQ(j["required_stream_name"], "get_weather") << out;
  EXPECT_EQ(j["required_stream_arguments"], j["required_arguments"]) << out;
  EXPECT_TRUE(j["required_stream_id"].is_string()) << out;
  EXPECT_EQ(j["required_stream_finish"], "tool_calls") << out;
  EXPECT_GE(j["required_stream_fragments"].get<int>(), 2) << out;
  EXPECT_EQ(j["required_stream_done"], true) << out;
  // response_format from zod, parsed by beta.chat.completions.parse: the schema's fields and types.
  EXPECT_EQ(j["zod_finish"], "stop") << out;
  EXPECT_EQ(j["zod_types"]["city"], "string") << out;
  EXPECT_TRUE(j["zod_types"]["unit"] == "c" || j["zod_types"]["unit"] == "f") << out;
  EXPECT_EQ(j["zod_types"]["sunny"], "boolean") << out;
  EXPECT_EQ(j["zod_types"]["days"], true) << out;
  EXPECT_EQ(j["zod_valid"], true) << out;
}

}  // namespace
}  // namespace gs
