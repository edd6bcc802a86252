// Implements ChatOutputStream and split_reasoning (server/tool_calls.h): a chat output's text
// as reasoning_content, content and tool_calls, streamed without taking back what was sent.
#include <fmt/format.h>

#include <random>

#include "server/tool_calls.h"

namespace gs {

namespace {

using Json = nlohmann::ordered_json;
using Tools = ChatOutputOptions::Tools;

const std::string kThink = "<think>", kEndThink = "</think>";

// The longest suffix of `s` that is a proper prefix of `marker` (held back while streaming).
size_t holdback(const std::string& s, const std::string& marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, marker, 0, n) == 0) return n;
  return 0;
}

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

// Where the parser's tool calls start in `c` (npos: none yet).
size_t tool_start(const std::string& parser, const std::string& c) {
  if (parser == "hermes") return c.find("<tool_call>");
  if (parser == "mistral") return c.find("[TOOL_CALLS]");
  size_t i = c.find_first_not_of(" \t\n");
  if (i == std::string::npos) return std::string::npos;
  if (parser == "llama3_json" && (c[i] == '{' || c.compare(i, 14, "<|python_tag|>") == 0)) return i;
  if (parser == "pythonic" && c[i] == '[') return i;
  return std::string::npos;
}

const std::string& tool_marker(const std::string& parser) {
  static const std::string hermes = "<tool_call>", mistral = "[TOOL_CALLS]", none;
  return parser == "hermes" ? hermes : parser == "mistral" ? mistral : none;
}

struct View {
  std::optional<std::string> reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  std::optional<std::string> named_arguments;  // a named tool_choice past the reasoning: its arguments so far
};

// What the text so far shows; `final`: the whole output (parse the calls, release held text).
View view(const ChatOutputOptions& o, const std::string& text, bool final) {
  View v;
  std::string c = text;
  if (!o.reasoning_parser.empty()) {
    if (!final && o.reasoning_parser == "qwen3" && text.size() < kThink.size() &&
        kThink.compare(0, text.size(), text) == 0)
      return v;  // not yet known whether it opens with <think>
    const bool opens = text.rfind(kThink, 0) == 0;
    if (o.reasoning_parser == "deepseek_r1" || opens) {
      std::string body = opens ? text.substr(kThink.size()) : text;
      size_t end = body.find(kEndThink);
      if (end != std::string::npos) {
        v.reasoning = body.substr(0, end);
        c = body.substr(end + kEndThink.size());
        c.erase(0, c.find_first_not_of('\n') == std::string::npos ? c.size() : c.find_first_not_of('\n'));
      } else {
        v.reasoning = final ? body : body.substr(0, body.size() - holdback(body, kEndThink));
        return v;
      }
    }
  }
  switch (o.tools) {
    case Tools::kNone: v.content = c; break;
    case Tools::kRequired:
    case Tools::kNamed:
      if (!final && o.tools == Tools::kNamed) v.named_arguments = c;
      if (final) {
        if (o.tools == Tools::kNamed) {
          v.calls.push_back({o.named_function, c});
        } else {
          Json list = Json::parse(c, nullptr, false);
          if (list.is_array())
            for (const auto& item : list)
              if (item.is_object() && item.contains("name"))
                v.calls.push_back({item["name"].get<std::string>(), item.value("parameters", Json::object()).dump()});
          if (v.calls.empty()) v.content = c;
        }
      }
      break;
    case Tools::kAuto: {
      if (final) {
        ParsedOutput p = parse_tool_calls(o.tool_parser, c);
        v.content = p.content;
        v.calls = std::move(p.calls);
      } else {
        size_t s = tool_start(o.tool_parser, c);
        v.content =
            s == std::string::npos ? c.substr(0, c.size() - holdback(c, tool_marker(o.tool_parser))) : c.substr(0, s);
        const size_t first = c.find_first_not_of(" \t\n");
        const bool opening = o.tool_parser == "llama3_json" || o.tool_parser == "pythonic";
        static const std::string kPythonTag = "<|python_tag|>";
        if (s == std::string::npos && opening &&
            (first == std::string::npos ||
             (o.tool_parser == "llama3_json" && kPythonTag.compare(0, c.size() - first, c, first) == 0)))
          v.content.clear();  // whitespace or part of <|python_tag|> so far: a call may still open
      }
      break;
    }
  }
  return v;
}

Json call_json(const ToolCall& c, int index, bool streamed) {
  Json j = Json::object();
  if (streamed) j["index"] = index;
  j["id"] = call_id();
  j["type"] = "function";
  j["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  return j;
}

}  // namespace

ReasoningSplit split_reasoning(const std::string& parser, const std::string& text) {
  ChatOutputOptions o;
  o.reasoning_parser = parser;
  View v = view(o, text, true);
  return {v.reasoning, v.content};
}

Json ChatOutputStream::feed(const std::string& text) {
  all_ += text;
  View v = view(opts_, all_, false);
  Json delta = Json::object();
  const std::string r = v.reasoning.value_or("");
  if (r.size() > sent_reasoning_) delta["reasoning_content"] = r.substr(sent_reasoning_), sent_reasoning_ = r.size();
  if (v.content.size() > sent_content_)
    delta["content"] = v.content.substr(sent_content_), sent_content_ = v.content.size();
  if (v.named_arguments) stream_named(*v.named_arguments, delta);
  return delta;
}

// A named tool_choice streams as OpenAI does: the call's id, type and name with the arguments so
// far once, then each later piece of the arguments alone (same index).
void ChatOutputStream::stream_named(const std::string& arguments, Json& delta) {
  Json call = {{"index", 0}};
  if (!named_opened_) {
    call = call_json({opts_.named_function, arguments}, 0, true);
    named_opened_ = true;
  } else if (arguments.size() > sent_arguments_) {
    call["function"] = {{"arguments", arguments.substr(sent_arguments_)}};
  } else {
    return;
  }
  sent_arguments_ = arguments.size();
  delta["tool_calls"] = Json::array({call});
}

Json ChatOutputStream::finish(bool& has_calls) {
  View v = view(opts_, all_, true);
  Json delta = Json::object();
  const std::string r = v.reasoning.value_or("");
  if (r.size() > sent_reasoning_) delta["reasoning_content"] = r.substr(sent_reasoning_);
  if (v.content.size() > sent_content_) delta["content"] = v.content.substr(sent_content_);
  has_calls = !v.calls.empty();
  if (has_calls && opts_.tools == Tools::kNamed) {
    stream_named(v.calls[0].arguments, delta);
  } else if (has_calls) {
    Json calls = Json::array();
    for (size_t i = 0; i < v.calls.size(); ++i) calls.push_back(call_json(v.calls[i], static_cast<int>(i), true));
    delta["tool_calls"] = calls;
  }
  return delta;
}

Json ChatOutputStream::message(const ChatOutputOptions& opts, const std::string& text, bool& has_calls) {
  View v = view(opts, text, true);
  Json m = {{"role", "assistant"}};
  has_calls = !v.calls.empty();
  m["content"] = has_calls && v.content.empty() ? Json(nullptr) : Json(v.content);
  if (v.reasoning) m["reasoning_content"] = *v.reasoning;
  if (has_calls) {
    Json calls = Json::array();
    for (size_t i = 0; i < v.calls.size(); ++i) calls.push_back(call_json(v.calls[i], static_cast<int>(i), false));
    m["tool_calls"] = calls;
  }
  return m;
}

}  // namespace gs
