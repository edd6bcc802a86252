// Tool-call parsers and reasoning splitting on crafted model text, whole and streamed in small
// pieces: every parser finds the calls (name, arguments) and leaves the rest as content, and a
// stream's deltas add up to the non-streamed message.
#include <gtest/gtest.h>

#include "server/tool_calls.h"

namespace gs {
namespace {

using Json = nlohmann::ordered_json;
using Tools = ChatOutputOptions::Tools;

ChatOutputOptions auto_tools(const std::string& parser, const std::string& reasoning = "") {
  ChatOutputOptions o;
  o.tools = Tools::kAuto;
  o.tool_parser = parser;
  o.reasoning_parser = reasoning;
  return o;
}

// Adds a streamed tool_calls entry as OpenAI clients do: a new index opens a call, a known one
// appends its arguments fragment.
inline void merge_tool_call(nlohmann::ordered_json& calls, const nlohmann::ordered_json& piece) {
  for (auto& c : calls)
    if (c["index"] == piece["index"]) {
      std::string args = c["function"]["arguments"].get<std::string>();
      if (piece.contains("function") && piece["function"].contains("arguments"))
        args += piece["function"]["arguments"].get<std::string>();
      c["function"]["arguments"] = args;
      return;
    }
  calls.push_back(piece);
}

// Streams `text` in pieces of `step` bytes; returns the accumulated content, reasoning and calls.
Json stream(const ChatOutputOptions& o, const std::string& text, size_t step, bool& calls) {
  ChatOutputStream s(o);
  std::string content, reasoning;
  Json tool_calls = Json::array();
  auto take = [&](const Json& d) {
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const auto& c : d["tool_calls"]) merge_tool_call(tool_calls, c);
  };
  for (size_t i = 0; i < text.size(); i += step) take(s.feed(text.substr(i, step)));
  take(s.finish(calls));
  return {{"content", content}, {"reasoning", reasoning}, {"tool_calls", tool_calls}};
}

struct Case {
  std::string parser, text;
  std::vector<std::pair<std::string, Json>> calls;
  std::string content;
};

TEST(ToolCallParsers, EachParserFindsTheCallsWholeAndStreamed) {
  const std::vector<Case> cases = {
      {"hermes",
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
       {{"get_weather", {{"city", "Paris"}}}, {"get_time", Json::object()}},
       "Let me check.\n"},
      {"llama3_json",
       "{\"name\": \"search\", \"parameters\": {\"q\": \"c++\", \"n\": 3}}; {\"name\": \"noop\", \"parameters\": {}}",
       {{"search", {{"q", "c++"}, {"n", 3}}}, {"noop", Json::object()}},
       ""},
      {"llama3_json", "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": [1, 2]}}", {{"f", {{"x", {1, 2}}}}}, ""},
      {"mistral",
       "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]",
       {{"add", {{"a", 1}, {"b", 2}}}},
       ""},
      {"pythonic",
       "[get_weather(city='Paris', units=\"metric\"), ping(), scale(v=[1, 2.5], on=True, tag=None)]",
       {{"get_weather", {{"city", "Paris"}, {"units", "metric"}}},
        {"ping", Json::object()},
        {"scale", {{"v", {1, 2.5}}, {"on", true}, {"tag", nullptr}}}},
       ""},
      {"hermes", "No tools needed: the answer is 4.", {}, "No tools needed: the answer is 4."},
      {"pythonic", "Plain text [not a call]", {}, "Plain text [not a call]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.parser + ": " + c.text);
    ParsedOutput p = parse_tool_calls(c.parser, c.text);
    ASSERT_EQ(p.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(p.calls[i].name, c.calls[i].first);
      EXPECT_EQ(Json::parse(p.calls[i].arguments), c.calls[i].second);
    }
    EXPECT_EQ(p.content, c.content);
    bool whole_calls = false;
    Json m = ChatOutputStream::message(auto_tools(c.parser), c.text, whole_calls);
    EXPECT_EQ(whole_calls, !c.calls.empty());
    for (size_t step : {1, 3, 7, 1000}) {
      bool calls = false;
      Json s = stream(auto_tools(c.parser), c.text, step, calls);
      EXPECT_EQ(calls, !c.calls.empty()) << step;
      EXPECT_EQ(s["content"], m["content"].is_null() ? Json("") : m["content"]) << step;
      ASSERT_EQ(s["tool_calls"].size(), c.calls.size());
      for (size_t i = 0; i < c.calls.size(); ++i) {
        EXPECT_EQ(s["tool_calls"][i]["index"], i);
        EXPECT_EQ(s["tool_calls"][i]["type"], "function");
        EXPECT_EQ(s["tool_calls"][i]["function"]["name"], c.calls[i].first);
        EXPECT_EQ(Json::parse(s["tool_calls"][i]["function"]["arguments"].get<std::string>()), c.calls[i].second);
      }
    }
  }
}

TEST(ReasoningParsers, ThinkMovesIntoReasoningContent) {
  auto r = split_reasoning("qwen3", "<think>\nLet me add.\n</think>\n\nThe sum is 4.");
  ASSERT_TRUE(r.reasoning);
  EXPECT_EQ(*r.reasoning, "\nLet me add.\n");
  EXPECT_EQ(r.content, "The sum is 4.");
  EXPECT_FALSE(split_reasoning("qwen3", "No thinking here.").reasoning);
  auto d = split_reasoning("deepseek_r1", "Hmm, 2+2.</think>4");  // R1's template opens <think> in the prompt
  EXPECT_EQ(*d.reasoning, "Hmm, 2+2.");
  EXPECT_EQ(d.content, "4");
  for (size_t step : {1, 2, 5}) {
    ChatOutputOptions o;
    o.reasoning_parser = "qwen3";
    bool calls = false;
    Json s = stream(o, "<think>\nLet me add.\n</think>\n\nThe sum is 4.", step, calls);
    EXPECT_EQ(s["reasoning"], "\nLet me add.\n");
    EXPECT_EQ(s["content"], "The sum is 4.");
  }
}

TEST(ReasoningParsers, ToolCallsAfterReasoning) {
  bool calls = false;
  const std::string text =
      "<think>I should call it.</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  Json m = ChatOutputStream::message(auto_tools("hermes", "qwen3"), text, calls);
  EXPECT_TRUE(calls);
  EXPECT_EQ(m["reasoning_content"], "I should call it.");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
  Json s = stream(auto_tools("hermes", "qwen3"), text, 2, calls);
  EXPECT_EQ(s["reasoning"], "I should call it.");
  EXPECT_EQ(s["tool_calls"].size(), 1u);
}

TEST(ToolChoice, RequiredAndNamedOutputsBecomeCalls) {
  ChatOutputOptions named;
  named.tools = Tools::kNamed;
  named.named_function = "get_weather";
  bool calls = false;
  Json m = ChatOutputStream::message(named, "{\"city\": \"Oslo\"}", calls);
  EXPECT_TRUE(calls);
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()), Json({{"city", "Oslo"}}));
  ChatOutputOptions required;
  required.tools = Tools::kRequired;
  m = ChatOutputStream::message(
      required, "[{\"name\": \"a\", \"parameters\": {\"x\": 1}}, {\"name\": \"b\", \"parameters\": {}}]", calls);
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "b");
  Json s = stream(required, "[{\"name\": \"a\", \"parameters\": {\"x\": 1}}]", 4, calls);
  EXPECT_EQ(s["content"], "");
  EXPECT_EQ(s["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
}

// A named tool_choice streams its call's name first, then the arguments in fragments (after the
// reasoning, with a reasoning parser), and the fragments add up to the whole arguments.
TEST(ToolChoice, NamedCallStreamsArgumentFragments) {
  ChatOutputOptions named;
  named.tools = Tools::kNamed;
  named.named_function = "get_weather";
  named.reasoning_parser = "qwen3";
  const std::string args = "{\"city\": \"Oslo\", \"days\": 3}";
  ChatOutputStream s(named);
  std::vector<Json> pieces;
  std::string reasoning;
  auto take = [&](const Json& d) {
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    EXPECT_FALSE(d.contains("content")) << d.dump();
    if (d.contains("tool_calls")) pieces.push_back(d["tool_calls"][0]);
  };
  const std::string text = "<think>\nOslo it is.\n</think>\n\n" + args;
  for (size_t i = 0; i < text.size(); i += 3) take(s.feed(text.substr(i, 3)));
  bool calls = false;
  take(s.finish(calls));
  EXPECT_TRUE(calls);
  EXPECT_EQ(reasoning, "\nOslo it is.\n");
  ASSERT_GE(pieces.size(), 3u) << "the arguments came in one piece";
  EXPECT_EQ(pieces[0]["function"]["name"], "get_weather");
  EXPECT_EQ(pieces[0]["type"], "function");
  EXPECT_TRUE(pieces[0].contains("id"));
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i]["index"], 0);
    if (i > 0) EXPECT_FALSE(pieces[i].contains("id")) << "only the first piece opens the call";
    joined += pieces[i]["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(joined, args);
}

}  // namespace
}  // namespace gs
