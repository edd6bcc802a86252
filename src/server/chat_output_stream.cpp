// Implements ChatOutputStream and split_reasoning (server/tool_calls.h): a chat output's text
// as reasoning_content, content and tool_calls, streamed without taking back what was sent.
#include <fmt/format.h>

#include <random>

#include "server/tool_call_scan.h"
#include "server/tool_calls.h"

namespace gs {

// What a chat output's text shows so far.
struct ChatOutputView {
  std::optional<std::string> reasoning;
  std::string content;
  std::vector<CallScan> calls;  // the calls whose name is known (final: the whole calls)
};

namespace {

using Json = nlohmann::ordered_json;
using Tools = ChatOutputOptions::Tools;

const std::string kThink = "<think>", kEndThink = "</think>";

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

// The calls of `c`, the text after the reasoning, scanned as it grows. The final reading keeps
// every call whose name came (one cut short keeps the arguments it has, as streaming sent them),
// and text after the calls that is not well formed is dropped; without calls, a text that is not
// well formed is all content.
void read_calls(const ChatOutputOptions& o, const std::string& c, bool final, ChatOutputView& v) {
  if (o.tools == Tools::kNamed) {
    v.calls.push_back({o.named_function, true, c, final});
    return;
  }
  ToolScan scan =
      o.tools == Tools::kRequired ? scan_required_calls(c, final) : scan_tool_calls(o.tool_parser, c, final);
  if (final && scan.calls.empty() && (!scan.complete || o.tools == Tools::kRequired)) {
    v.content = c;
    return;
  }
  v.content = c.substr(0, scan.content_end);
  v.calls = std::move(scan.calls);
}

// What the text so far shows; `final`: the whole output (parse the calls, release held text).
ChatOutputView view(const ChatOutputOptions& o, const std::string& text, bool final) {
  ChatOutputView v;
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
        v.reasoning = final ? body : body.substr(0, body.size() - marker_holdback(body, kEndThink));
        return v;
      }
    }
  }
  if (o.tools == Tools::kNone)
    v.content = c;
  else
    read_calls(o, c, final, v);
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
  ChatOutputView v = view(o, text, true);
  return {v.reasoning, v.content};
}

namespace {

// Bytes of `s` up to its last complete UTF-8 character (a fragment never splits one).
size_t utf8_complete(const std::string& s) {
  size_t n = s.size(), back = 0;
  while (back < 4 && back < n && (static_cast<unsigned char>(s[n - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back == n) return n;
  const unsigned char lead = static_cast<unsigned char>(s[n - 1 - back]);
  const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return len > back + 1 ? n - 1 - back : n;
}

// The deltas of one step, in order: reasoning and content first, then at most one tool-call
// entry per delta (a call's opening and its first fragment never share a chunk).
class Deltas {
 public:
  void text(const char* key, const std::string& s) {
    Json& d = current();
    d[key] = d.contains(key) ? d[key].get<std::string>() + s : s;
  }
  void call(Json entry) { current()["tool_calls"] = Json::array({std::move(entry)}); }
  std::vector<Json> take() { return std::move(list_); }

 private:
  Json& current() {
    if (list_.empty() || list_.back().contains("tool_calls")) list_.push_back(Json::object());
    return list_.back();
  }
  std::vector<Json> list_;
};

}  // namespace

std::vector<Json> ChatOutputStream::feed(const std::string& text) {
  all_ += text;
  return send(view(opts_, all_, false), false);
}

std::vector<Json> ChatOutputStream::finish(bool& has_calls) {
  ChatOutputView v = view(opts_, all_, true);
  has_calls = !v.calls.empty() || !sent_arguments_.empty();
  return send(v, true);
}

// What `v` shows beyond what was sent. Calls stream as OpenAI's do: once its name is known, a
// call opens (index, id, type, name, empty arguments), then each new piece of its arguments
// follows alone under the same index.
std::vector<Json> ChatOutputStream::send(const ChatOutputView& v, bool final) {
  Deltas out;
  const std::string r = v.reasoning.value_or("");
  if (r.size() > sent_reasoning_) out.text("reasoning_content", r.substr(sent_reasoning_)), sent_reasoning_ = r.size();
  if (v.content.size() > sent_content_)
    out.text("content", v.content.substr(sent_content_)), sent_content_ = v.content.size();
  for (size_t i = 0; i < v.calls.size(); ++i) {
    const CallScan& c = v.calls[i];
    if (i == sent_arguments_.size()) {
      out.call(call_json({c.name, ""}, static_cast<int>(i), true));
      sent_arguments_.push_back(0);
    }
    const size_t ready = final ? c.arguments.size() : utf8_complete(c.arguments);
    if (ready > sent_arguments_[i]) {
      out.call({{"index", i},
                {"function", {{"arguments", c.arguments.substr(sent_arguments_[i], ready - sent_arguments_[i])}}}});
      sent_arguments_[i] = ready;
    }
  }
  return out.take();
}

Json ChatOutputStream::message(const ChatOutputOptions& opts, const std::string& text, bool& has_calls) {
  ChatOutputView v = view(opts, text, true);
  Json m = {{"role", "assistant"}};
  has_calls = !v.calls.empty();
  m["content"] = has_calls && v.content.empty() ? Json(nullptr) : Json(v.content);
  if (v.reasoning) m["reasoning_content"] = *v.reasoning;
  if (has_calls) {
    Json calls = Json::array();
    for (size_t i = 0; i < v.calls.size(); ++i)
      calls.push_back(call_json({v.calls[i].name, v.calls[i].arguments}, static_cast<int>(i), false));
    m["tool_calls"] = calls;
  }
  return m;
}

}  // namespace gs
