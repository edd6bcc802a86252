// Structured output end to end: the real engine on the CPU (random tiny weights with Qwen2.5's
// 151936-token vocabulary, so the masks cover a real tokenizer) behind the HTTP API. Every
// constrained output is accepted by its grammar (and, when it ends, validates); free requests
// beside constrained ones give exactly their solo output; bad constraints are 400s naming the
// field and the keyword.
#include <gtest/gtest.h>

#include <thread>

#include "http_client.h"
#include "qwen_vocab_config.h"
#include "real_server.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"

namespace gs {
namespace {

using nlohmann::json;

test::RealServer& server() {
  static test::RealServer s(test::qwen_vocab_config());
  return s;
}

// The output must be a sentence of the grammar when the request stopped, else a prefix of one.
void expect_follows(const structured::ConstraintSpec& spec, const json& choice, const std::string& text) {
  auto g = server().engine.compile_constraint(spec);
  structured::GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes(text)) << text;
  if (choice["finish_reason"] == "stop") {
    EXPECT_TRUE(m.can_end()) << text;
  }
}

structured::ConstraintSpec schema_spec(const json& schema) {
  structured::ConstraintSpec s;
  s.kind = structured::ConstraintSpec::Kind::kJsonSchema;
  s.text = schema.dump();
  return s;
}

const json kSchema = json::parse(R"({"type":"object","properties":{"ok":{"type":"boolean"},
    "n":{"type":"integer","minimum":0,"maximum":99}},"required":["ok","n"]})");

TEST(StructuredE2E, ChatResponseFormatJsonSchema) {
  json body = {{"messages", {{{"role", "user"}, {"content", "answer"}}}},
               {"max_tokens", 48},
               {"temperature", 0},
               {"response_format",
                {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", kSchema}, {"strict", true}}}}}};
  auto r = test::post(server().port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json choice = r.json()["choices"][0];
  expect_follows(schema_spec(kSchema), choice, choice["message"]["content"]);
}

TEST(StructuredE2E, CompletionsRegexChoiceGrammarAndGuidedSpellings) {
  using Kind = structured::ConstraintSpec::Kind;
  struct Case {
    json fields;
    structured::ConstraintSpec spec;
  };
  std::vector<Case> cases = {
      {{{"structured_outputs", {{"regex", "[a-z]{2,5}-\\d{3}"}}}}, {Kind::kRegex, "[a-z]{2,5}-\\d{3}", {}}},
      {{{"guided_regex", "(yes|no)!"}}, {Kind::kRegex, "(yes|no)!", {}}},
      {{{"structured_outputs", {{"choice", {"alpha", "beta"}}}}}, {Kind::kChoice, "", {"alpha", "beta"}}},
      {{{"guided_choice", {"up", "down"}}}, {Kind::kChoice, "", {"up", "down"}}},
      {{{"structured_outputs", {{"grammar", "root ::= \"(\" [0-9]+ \")\""}}}},
       {Kind::kGrammar, "root ::= \"(\" [0-9]+ \")\"", {}}},
      {{{"guided_json", kSchema}}, schema_spec(kSchema)},
      {{{"response_format", {{"type", "json_object"}}}}, {Kind::kJsonObject, "", {}}},
  };
  for (const auto& c : cases) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}};
    body.update(c.fields);
    auto r = test::post(server().port(), "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << body.dump() << " -> " << r.body;
    json choice = r.json()["choices"][0];
    SCOPED_TRACE(body.dump());
    expect_follows(c.spec, choice, choice["text"]);
    if (c.spec.kind == Kind::kChoice || c.spec.kind == Kind::kRegex) {
      EXPECT_EQ(choice["finish_reason"], "stop");
    }
  }
}

TEST(StructuredE2E, TextResponseFormatIsUnconstrained) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  auto free = test::post(server().port(), "/v1/completions", body.dump());
  body["response_format"] = {{"type", "text"}};
  auto text = test::post(server().port(), "/v1/completions", body.dump());
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(free.json()["choices"][0]["text"], text.json()["choices"][0]["text"]);
}

TEST(StructuredE2E, BadConstraintsAre400sNamingFieldAndKeyword) {
  struct Case {
    json fields;
    std::string param, needle;
  };
  std::vector<Case> cases = {
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"minProperties", 1}}}}}}}},
       "response_format.json_schema.schema",
       "minProperties"},
      {{{"guided_regex", "(a)\\1"}}, "guided_regex", "backreferences"},
      {{{"structured_outputs", {{"grammar", "root ::= missing"}}}}, "structured_outputs.grammar", "missing"},
      {{{"guided_json", {{"type", "string"}, {"format", "ipv6"}}}}, "guided_json", "format"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type", "xml"},
      {{{"guided_regex", "a+"}, {"guided_choice", {"a"}}}, "guided_choice", "guided_regex"},
  };
  for (const auto& c : cases) {
    json body = {{"prompt", "x"}, {"max_tokens", 4}};
    body.update(c.fields);
    auto r = test::post(server().port(), "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(c.needle), std::string::npos) << r.body;
  }
}

const json kTools = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"weather",
    "parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":7}},
    "required":["unit","days"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"ping","parameters":{"type":"object","properties":{}}}}])");

// tool_choice required / named: the output is constrained, so the calls' arguments validate.
TEST(StructuredE2E, RequiredAndNamedToolChoiceGiveValidCalls) {
  for (json tc : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
    for (bool streamed : {false, true}) {
      SCOPED_TRACE(tc.dump() + (streamed ? " streamed" : ""));
      json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}},
                   {"max_tokens", 300},
                   {"temperature", 0},
                   {"tools", kTools},
                   {"tool_choice", tc},
                   {"stream", streamed}};
      json message, finish;
      if (streamed) {
        auto r = test::post_stream(server().port(), "/v1/chat/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.raw;
        message = {{"tool_calls", json::array()}};
        for (const auto& e : r.events) {
          if (e["choices"].empty()) continue;
          const json& ch = e["choices"][0];
          if (ch["delta"].contains("tool_calls"))
            for (const auto& c : ch["delta"]["tool_calls"]) {  // fragments of a known index extend it
              json* known = nullptr;
              for (auto& m : message["tool_calls"])
                if (m["index"] == c["index"]) known = &m;
              if (!known) {
                message["tool_calls"].push_back(c);
              } else if (c.contains("function") && c["function"].contains("arguments")) {
                (*known)["function"]["arguments"] = (*known)["function"]["arguments"].get<std::string>() +
                                                    c["function"]["arguments"].get<std::string>();
              }
            }
          if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        }
      } else {
        auto r = test::post(server().port(), "/v1/chat/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.body;
        message = r.json()["choices"][0]["message"];
        finish = r.json()["choices"][0]["finish_reason"];
      }
      if (finish == "length") continue;  // the random model ran out of tokens inside the JSON
      EXPECT_EQ(finish, tc == "required" ? "tool_calls" : "stop");
      ASSERT_GE(message["tool_calls"].size(), 1u) << message.dump();
      for (const auto& call : message["tool_calls"]) {
        EXPECT_EQ(call["type"], "function");
        json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
        ASSERT_TRUE(args.is_object()) << call.dump();
        if (call["function"]["name"] == "get_weather") {
          EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args.dump();
          EXPECT_GE(args["days"].get<int>(), 1);
          EXPECT_LE(args["days"].get<int>(), 7);
        } else {
          EXPECT_EQ(call["function"]["name"], "ping");
        }
      }
    }
  }
}

// A streamed "required" call comes as OpenAI's does: one chunk opens each call (index, id, type,
// name, empty arguments), then chunks carry its arguments in fragments, and they add up to exactly
// the arguments of the same (seeded) request not streamed; the last chunk says "tool_calls". The
// random model often wanders in the whitespace JSON allows, so the test takes the first seed whose
// call ends within max_tokens.
TEST(StructuredE2E, RequiredToolChoiceStreamsArgumentFragments) {
  json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}},
               {"max_tokens", 200},
               {"temperature", 1.0},
               {"tools", kTools},
               {"tool_choice", "required"},
               {"parallel_tool_calls", false}};
  json choice;
  for (int seed = 0; seed < 24 && choice["finish_reason"] != "tool_calls"; ++seed) {
    body["seed"] = seed;
    auto whole = test::post(server().port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    choice = whole.json()["choices"][0];
  }
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << "no seed gave a whole call: " << choice.dump();
  const json call = choice["message"]["tool_calls"][0];
  body["stream"] = true;
  auto r = test::post_stream(server().port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  std::string name, arguments, finish;
  int opened = 0, fragments = 0;
  for (const auto& e : r.events) {
    if (e["choices"].empty()) continue;
    const json& ch = e["choices"][0];
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    ASSERT_EQ(ch["delta"]["tool_calls"].size(), 1u) << e.dump();
    const json& piece = ch["delta"]["tool_calls"][0];
    EXPECT_EQ(piece["index"], 0) << e.dump();
    if (piece.contains("id")) {
      ++opened;
      EXPECT_EQ(fragments, 0) << "a fragment came before its call opened";
      EXPECT_EQ(piece["type"], "function");
      EXPECT_EQ(piece["function"]["arguments"], "");
      name = piece["function"]["name"];
    } else {
      ++fragments;
      EXPECT_FALSE(piece["function"].contains("name")) << e.dump();
      arguments += piece["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(opened, 1) << r.raw;
  EXPECT_GE(fragments, 2) << "the arguments came in one piece: " << r.raw;
  EXPECT_EQ(name, call["function"]["name"]);
  EXPECT_EQ(arguments, call["function"]["arguments"]);
  EXPECT_EQ(finish, "tool_calls");
}

TEST(StructuredE2E, ToolChoiceErrorsAre400s) {
  auto ask = [](json tc, json tools) {
    json body = {
        {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 4}, {"tools", tools}, {"tool_choice", tc}};
    return test::post(server().port(), "/v1/chat/completions", body.dump());
  };
  auto r = ask("auto", kTools);  // this server runs without --enable-auto-tool-choice
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("--enable-auto-tool-choice"), std::string::npos) << r.body;
  r = ask(json{{"type", "function"}, {"function", {{"name", "nope"}}}}, kTools);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("nope"), std::string::npos) << r.body;
  r = ask("required", json::array());
  EXPECT_EQ(r.status, 400);
  r = ask("none", kTools);
  EXPECT_EQ(r.status, 200) << r.body;
}

// 16 constrained beside 16 free requests at once: every free one equals its solo output.
TEST(StructuredE2E, FreeRequestsBesideConstrainedOnesKeepTheirOutput) {
  auto free_body = [](int i) {
    return json{{"prompt", "Story " + std::to_string(i)}, {"max_tokens", 24}, {"temperature", 0.8}, {"seed", 100 + i}};
  };
  std::vector<std::string> solo(16);
  for (int i = 0; i < 16; ++i) {
    auto r = test::post(server().port(), "/v1/completions", free_body(i).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    solo[i] = r.json()["choices"][0]["text"];
  }
  std::vector<std::string> together(16);
  std::vector<json> constrained(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto r = test::post(server().port(), "/v1/completions", free_body(i).dump());
      together[i] = r.status == 200 ? r.json()["choices"][0]["text"].get<std::string>() : r.body;
    });
    threads.emplace_back([&, i] {
      json body = {
          {"prompt", "Data " + std::to_string(i)},
          {"max_tokens", 32},
          {"temperature", 1.0},
          {"seed", i},
          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", kSchema}}}}}};
      auto r = test::post(server().port(), "/v1/completions", body.dump());
      constrained[i] = r.status == 200 ? r.json()["choices"][0] : json{{"error", r.body}};
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(together[i], solo[i]) << "free request " << i;
    ASSERT_TRUE(constrained[i].contains("text")) << constrained[i].dump();
    expect_follows(schema_spec(kSchema), constrained[i], constrained[i]["text"]);
  }
}

}  // namespace
}  // namespace gs
