// Auto tool choice over HTTP, through each --tool-call-parser: a fake engine writes crafted model
// output one byte a token, and the streamed chat completion must look like OpenAI's: content
// before the call as content chunks, one chunk opening each call (index, id, type, name, empty
// arguments), then chunks of argument fragments, finish_reason "tool_calls" on the last chunk;
// the fragments add up to the non-streamed response's arguments.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "http_client.h"
#include "server/api_server.h"

namespace gs {
namespace {

using nlohmann::json;

struct Streamed {
  std::string content;
  json calls = json::array();  // assembled: name, arguments, fragments
  std::string finish;
  bool content_before_calls = true;
};

Streamed read_stream(const test::SseResult& r) {
  Streamed s;
  for (size_t e = 0; e < r.events.size(); ++e) {
    const json& ev = r.events[e];
    if (ev["choices"].empty()) continue;
    const json& ch = ev["choices"][0];
    if (!ch["finish_reason"].is_null()) {
      EXPECT_EQ(s.finish, "") << "a finish_reason before the last chunk";
      s.finish = ch["finish_reason"];
    }
    const json& d = ch["delta"];
    if (d.contains("content")) {
      s.content += d["content"].get<std::string>();
      if (!s.calls.empty() && !d["content"].get<std::string>().empty()) s.content_before_calls = false;
    }
    if (!d.contains("tool_calls")) continue;
    EXPECT_EQ(d["tool_calls"].size(), 1u) << ev.dump();
    const json& c = d["tool_calls"][0];
    const size_t index = c["index"];
    if (index == s.calls.size()) {  // opens the call
      EXPECT_TRUE(c["id"].is_string()) << ev.dump();
      EXPECT_EQ(c["type"], "function") << ev.dump();
      EXPECT_EQ(c["function"]["arguments"], "") << ev.dump();
      s.calls.push_back({{"name", c["function"]["name"]}, {"arguments", ""}, {"fragments", 0}});
    } else {
      if (index >= s.calls.size()) {
        ADD_FAILURE() << "a fragment of a call that did not open: " << ev.dump();
        continue;
      }
      EXPECT_FALSE(c.contains("id") || c["function"].contains("name")) << ev.dump();
      json& known = s.calls[index];
      known["arguments"] = known["arguments"].get<std::string>() + c["function"]["arguments"].get<std::string>();
      known["fragments"] = known["fragments"].get<int>() + 1;
    }
  }
  return s;
}

struct ParserCase {
  std::string parser, output, content;
  std::vector<std::string> names;
};

TEST(ToolStreamHttp, AutoToolCallsStreamThroughEachParser) {
  const std::vector<ParserCase> cases = {
      {"hermes",
       "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\u00e8te\", \"days\": "
       "3}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
       "Let me look.",
       {"get_weather", "get_time"}},
      {"llama3_json",
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"get_time\", "
       "\"parameters\": {\"tz\": \"CET\"}}",
       "",
       {"get_weather", "get_time"}},
      {"mistral",
       "On it.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"days\": 2}}]",
       "On it.",
       {"get_weather"}},
      {"pythonic", "[get_weather(city='Nice', days=4), get_time(tz=\"CET\")]", "", {"get_weather", "get_time"}},
  };
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.parser);
    test::FakeEngine engine;
    engine.mutable_model().max_model_len = 1024;
    engine.set_script(c.output);
    ServerConfig cfg;
    cfg.port = 0;
    cfg.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
    cfg.chat_output = {true, c.parser, ""};
    ApiServer server(engine, cfg);
    server.start();
    json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"tools", tools}};
    auto whole = test::post(server.port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json choice = whole.json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << whole.body;
    EXPECT_EQ(choice["message"]["content"], c.content.empty() ? json(nullptr) : json(c.content)) << whole.body;
    const json calls = choice["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), c.names.size()) << whole.body;

    body["stream"] = true;
    auto r = test::post_stream(server.port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_TRUE(r.done);
    const Streamed s = read_stream(r);
    EXPECT_EQ(s.content, c.content) << r.raw;
    EXPECT_TRUE(s.content_before_calls) << r.raw;
    EXPECT_EQ(s.finish, "tool_calls") << r.raw;
    ASSERT_EQ(s.calls.size(), c.names.size()) << r.raw;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(s.calls[i]["name"], c.names[i]);
      EXPECT_EQ(calls[i]["function"]["name"], c.names[i]);
      EXPECT_EQ(s.calls[i]["arguments"], calls[i]["function"]["arguments"]) << r.raw;
      EXPECT_TRUE(json::parse(s.calls[i]["arguments"].get<std::string>(), nullptr, false).is_object());
      EXPECT_GE(s.calls[i]["fragments"].get<int>(), c.parser == "pythonic" ? 1 : 5) << r.raw;
    }
  }
}

// With auto, an answer that is not a call streams as plain content and finishes "stop".
TEST(ToolStreamHttp, AutoWithoutACallIsContent) {
  test::FakeEngine engine;
  engine.mutable_model().max_model_len = 1024;
  engine.set_script("It is sunny in Paris.");
  ServerConfig cfg;
  cfg.port = 0;
  cfg.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  cfg.chat_output = {true, "hermes", ""};
  ApiServer server(engine, cfg);
  server.start();
  json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}},
               {"tools", json::parse(R"([{"type": "function", "function": {"name": "f"}}])")},
               {"stream", true}};
  auto r = test::post_stream(server.port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  const Streamed s = read_stream(r);
  EXPECT_EQ(s.content, "It is sunny in Paris.");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.finish, "stop");
}

}  // namespace
}  // namespace gs
