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

// Streams `text` cut into `pieces`; returns the accumulated content, reasoning and calls. Checks
// the protocol on the way: each delta carries at most one tool_calls entry; a call opens once
// (index, id, type "function", name, arguments "") and then only adds arguments fragments.
Json stream_pieces(const ChatOutputOptions& o, const std::vector<std::string>& pieces, bool& calls,
                   size_t* fragments = nullptr) {
  ChatOutputStream s(o);
  std::string content, reasoning;
  Json tool_calls = Json::array();
  auto take = [&](const std::vector<Json>& deltas) {
    for (const Json& d : deltas) {
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (!d.contains("tool_calls")) continue;
      ASSERT_EQ(d["tool_calls"].size(), 1u) << d.dump();
      const Json& c = d["tool_calls"][0];
      if (c["index"] == tool_calls.size()) {
        EXPECT_TRUE(c.contains("id") && c["type"] == "function" && c["function"].contains("name")) << c.dump();
        EXPECT_EQ(c["function"]["arguments"], "") << c.dump();
      } else {
        ASSERT_LT(c["index"].get<size_t>(), tool_calls.size()) << c.dump();
        EXPECT_FALSE(c.contains("id") || c["function"].contains("name")) << c.dump();
        EXPECT_FALSE(c["function"]["arguments"].get<std::string>().empty()) << c.dump();
        if (fragments) ++*fragments;
      }
      merge_tool_call(tool_calls, c);
    }
  };
  for (const auto& p : pieces) take(s.feed(p));
  take(s.finish(calls));
  return {{"content", content}, {"reasoning", reasoning}, {"tool_calls", tool_calls}};
}

Json stream(const ChatOutputOptions& o, const std::string& text, size_t step, bool& calls) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size(); i += step) pieces.push_back(text.substr(i, step));
  return stream_pieces(o, pieces, calls);
}

// The streamed message equals the whole one: content, and each call's name and exact arguments.
void expect_same_as_whole(const ChatOutputOptions& o, const std::string& text, const std::vector<std::string>& pieces) {
  bool whole_calls = false, calls = false;
  const Json m = ChatOutputStream::message(o, text, whole_calls);
  const Json s = stream_pieces(o, pieces, calls);
  EXPECT_EQ(calls, whole_calls);
  EXPECT_EQ(s["content"], m["content"].is_null() ? Json("") : m["content"]);
  EXPECT_EQ(s["reasoning"], m.value("reasoning_content", Json("")));
  const Json want = m.value("tool_calls", Json::array());
  ASSERT_EQ(s["tool_calls"].size(), want.size()) << s.dump();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s["tool_calls"][i]["index"], i);
    EXPECT_EQ(s["tool_calls"][i]["function"]["name"], want[i]["function"]["name"]);
    EXPECT_EQ(s["tool_calls"][i]["function"]["arguments"], want[i]["function"]["arguments"]);
  }
}

// Every cut of `text` into two pieces, one-byte pieces and a few regular steps.
void expect_every_split(const ChatOutputOptions& o, const std::string& text) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expect_same_as_whole(o, text, {text.substr(0, cut), text.substr(cut)});
  }
  for (size_t step : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size(); i += step) pieces.push_back(text.substr(i, step));
    expect_same_as_whole(o, text, pieces);
  }
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
  EXPECT_EQ(s["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");  // the model's text
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
  auto take = [&](const std::vector<Json>& deltas) {
    for (const Json& d : deltas) {
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      EXPECT_FALSE(d.contains("content")) << d.dump();
      if (d.contains("tool_calls")) pieces.push_back(d["tool_calls"][0]);
    }
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
    if (i > 0) {
      EXPECT_FALSE(pieces[i].contains("id")) << "only the first piece opens the call";
    }
    joined += pieces[i]["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(joined, args);
}

ChatOutputOptions required_tools(const std::string& reasoning = "") {
  ChatOutputOptions o;
  o.tools = Tools::kRequired;
  o.reasoning_parser = reasoning;
  return o;
}

// Crafted outputs of each parser: content before calls, parallel calls, arguments as an object, as
// a JSON string and absent, non-ASCII text, and outputs that are not calls (or not well formed).
// Cut anywhere, each streams exactly its whole parse.
TEST(ToolCallStreaming, EveryParserStreamsItsWholeParseAtEverySplit) {
  const std::vector<std::pair<ChatOutputOptions, std::string>> cases = {
      {auto_tools("hermes"),
       "Checking. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\u00e3o Paulo\", \"d\": [1, "
       "{\"x\": \"}\"}]}}\n</tool_call>\n<tool_call>{\"arguments\": {}, \"name\": \"now\"}</tool_call>"},
      {auto_tools("hermes"), "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>"},
      {auto_tools("hermes"), "<tool_call>{\"name\": \"ping\"}"},
      {auto_tools("hermes"), "No call, just a <tag> and </tool_call>."},
      {auto_tools("hermes"), "Broken: <tool_call>{\"name\": 3}</tool_call>"},
      {auto_tools("llama3_json"),
       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"a;b\", \"n\": 10}}; {\"name\": \"noop\", "
       "\"parameters\": {}}"},
      {auto_tools("llama3_json"), "  {\"name\": \"f\", \"arguments\": {\"deep\": {\"a\": [true, null, -1.5e3]}}}"},
      {auto_tools("llama3_json"), "The answer is {not json}."},
      {auto_tools("llama3_json"), "{\"name\": \"f\", \"parameters\": {\"x\": 1}} trailing words"},
      {auto_tools("mistral"),
       "Sure.[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"neg\", "
       "\"arguments\": {\"a\": -7}}]"},
      {auto_tools("mistral"), "[TOOL_CALLS]{\"name\": \"one\", \"arguments\": {\"k\": \"v\"}}"},
      {auto_tools("mistral"), "A [TOOL] that is not [TOOL_CALLS"},
      {auto_tools("pythonic"),
       "[get_weather(city='Paris', units=\"metric\"), ping(), scale(v=[1, 2.5], on=True, tag=None, m={'k': 'v'})]"},
      {auto_tools("pythonic"), "  [mod.fn(n=-12, s='it\\'s \u00e9t\u00e9')]  "},
      {auto_tools("pythonic"), "[1, 2, 3] are numbers"},
      {auto_tools("pythonic"), "Plain text [not a call]"},
      {auto_tools("hermes", "qwen3"),
       "<think>Need the weather.</think>\n\n<tool_call>{\"name\": \"w\", \"arguments\": {\"c\": "
       "\"Oslo\"}}</tool_call>"},
      {required_tools(),
       "[{\"name\": \"a\", \"parameters\": {\"x\": 1, \"s\": \"[{,}]\"}}, {\"name\": \"b\", "
       "\"parameters\": {}}]"},
      {required_tools("deepseek_r1"), "Two calls.</think>[ {\"name\": \"a\", \"parameters\": {\"y\": [\"\u00fc\"]}} ]"},
      {required_tools(), "[{\"name\": \"a\", \"parameters\": {\"x\": "},  // cut by max_tokens
  };
  const std::vector<size_t> num_calls = {2, 1, 1, 0, 0, 2, 1, 0, 1, 2, 1, 0, 3, 1, 0, 0, 1, 2, 1, 1};
  ASSERT_EQ(cases.size(), num_calls.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [o, text] = cases[i];
    SCOPED_TRACE(o.tool_parser + ": " + text);
    bool calls = false;
    EXPECT_EQ(ChatOutputStream::message(o, text, calls).value("tool_calls", Json::array()).size(), num_calls[i]);
    expect_every_split(o, text);
  }
}

// Arguments stream as the model writes them, not at the end: fed one byte at a time, a call's
// arguments arrive in many fragments, for every parser and tool_choice.
TEST(ToolCallStreaming, ArgumentsArriveInFragments) {
  ChatOutputOptions named;
  named.tools = Tools::kNamed;
  named.named_function = "f";
  const std::vector<std::pair<ChatOutputOptions, std::string>> cases = {
      {auto_tools("hermes"),
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"text\": \"a long argument\"}}</tool_call>"},
      {auto_tools("llama3_json"), "{\"name\": \"f\", \"parameters\": {\"text\": \"a long argument\"}}"},
      {auto_tools("mistral"), "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"text\": \"a long argument\"}}]"},
      {auto_tools("pythonic"), "[f(a=1, b=2, c=3, d=4, e=5)]"},
      {required_tools(), "[{\"name\": \"f\", \"parameters\": {\"text\": \"a long argument\"}}]"},
      {named, "{\"text\": \"a long argument\"}"},
  };
  for (const auto& [o, text] : cases) {
    SCOPED_TRACE(text);
    std::vector<std::string> bytes;
    for (char c : text) bytes.push_back(std::string(1, c));
    bool calls = false;
    size_t fragments = 0;
    Json s = stream_pieces(o, bytes, calls, &fragments);
    EXPECT_TRUE(calls);
    EXPECT_GE(fragments, 5u) << s.dump();
  }
}

// With auto, text that is not a call streams as content while it comes.
TEST(ToolCallStreaming, PlainTextStreamsAsContentBeforeTheEnd) {
  for (const std::string parser : {"hermes", "llama3_json", "mistral", "pythonic"}) {
    ChatOutputStream s(auto_tools(parser));
    std::string before_finish;
    for (char c : std::string("Hello there, no tools today."))
      for (const Json& d : s.feed(std::string(1, c))) before_finish += d.value("content", "");
    EXPECT_EQ(before_finish, "Hello there, no tools today.") << parser;
  }
}

}  // namespace
}  // namespace gs
