// The pythonic tool-call scanner (server/tool_call_scan.h) and parse_tool_calls
// (server/tool_calls.h): the model's text -> calls, through the parsers' final scan.
#include <cctype>

#include "server/tool_call_scan.h"
#include "server/tool_calls.h"

namespace gs {

namespace {

using Json = nlohmann::ordered_json;

// A Python literal (str, int, float, True/False/None, list, dict) at s[i] -> JSON.
class PyLiteral {
 public:
  explicit PyLiteral(const std::string& s) : s_(s) {}
  bool value(size_t& i, Json& out) {
    skip(i);
    if (i >= s_.size()) return false;
    char c = s_[i];
    if (c == '"' || c == '\'') return str(i, out);
    if (c == '[' || c == '(') return list(i, out, c == '[' ? ']' : ')');
    if (c == '{') return dict(i, out);
    size_t start = i;
    while (i < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i])) || s_[i] == '.' || s_[i] == '-' ||
                             s_[i] == '+' || s_[i] == '_'))
      ++i;
    std::string word = s_.substr(start, i - start);
    if (word == "True")
      out = true;
    else if (word == "False")
      out = false;
    else if (word == "None")
      out = nullptr;
    else {
      out = Json::parse(word, nullptr, false);
      if (out.is_discarded() || !out.is_number()) return false;
    }
    return true;
  }
  void skip(size_t& i) const {
    while (i < s_.size() && std::isspace(static_cast<unsigned char>(s_[i]))) ++i;
  }

 private:
  bool str(size_t& i, Json& out) {
    char q = s_[i++];
    std::string v;
    while (i < s_.size() && s_[i] != q) {
      if (s_[i] == '\\' && i + 1 < s_.size()) {
        char e = s_[++i];
        v += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        v += s_[i];
      }
      ++i;
    }
    if (i >= s_.size()) return false;
    ++i;
    out = v;
    return true;
  }
  bool list(size_t& i, Json& out, char close) {
    ++i;
    out = Json::array();
    for (;;) {
      skip(i);
      if (i < s_.size() && s_[i] == close) return ++i, true;
      Json v;
      if (!value(i, v)) return false;
      out.push_back(v);
      skip(i);
      if (i < s_.size() && s_[i] == ',') ++i;
    }
  }
  bool dict(size_t& i, Json& out) {
    ++i;
    out = Json::object();
    for (;;) {
      skip(i);
      if (i < s_.size() && s_[i] == '}') return ++i, true;
      Json k, v;
      if (!value(i, k) || !k.is_string()) return false;
      skip(i);
      if (i >= s_.size() || s_[i] != ':') return false;
      ++i;
      if (!value(i, v)) return false;
      out[k.get<std::string>()] = v;
      skip(i);
      if (i < s_.size() && s_[i] == ',') ++i;
    }
  }
  const std::string& s_;
};

bool ident_char(char c, bool dotted) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dotted && c == '.');
}

std::string compact(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

enum class Step { kOpen, kDone, kBad };

// One call's keyword arguments after '(' at t[i], built into `c.arguments` as a compact JSON
// object one complete argument at a time ('}' at the ')').
Step pythonic_arguments(const std::string& t, size_t& i, PyLiteral& py, CallScan& c) {
  std::string args = "{";
  for (;;) {
    py.skip(i);
    if (i >= t.size()) return Step::kOpen;
    if (t[i] == ')') {
      ++i;
      c.arguments = args + "}";
      c.done = true;
      return Step::kDone;
    }
    const size_t k = i;
    while (i < t.size() && ident_char(t[i], false)) ++i;
    const std::string key = t.substr(k, i - k);
    py.skip(i);
    if (i >= t.size()) return Step::kOpen;
    if (key.empty() || t[i] != '=') return Step::kBad;
    ++i;
    Json v;
    if (!py.value(i, v)) return i >= t.size() ? Step::kOpen : Step::kBad;
    py.skip(i);
    if (i >= t.size()) return Step::kOpen;  // a number or word may go on
    if (t[i] != ',' && t[i] != ')') return Step::kBad;
    if (t[i] == ',') ++i;
    if (args.size() > 1) args += ',';
    args += compact(Json(key));
    args += ':';
    args += compact(v);
    c.arguments = args;
  }
}

}  // namespace

// The output is a list of calls only; anything else is content (decided by its first non-blank
// character).
ToolScan scan_pythonic(const std::string& t, bool final) {
  ToolScan scan;
  PyLiteral py(t);
  size_t i = 0;
  py.skip(i);
  if (i == t.size() || t[i] != '[') {
    scan.content_end = i == t.size() && !final ? 0 : t.size();
    scan.complete = true;
    return scan;
  }
  ++i;
  for (;;) {
    py.skip(i);
    if (i >= t.size()) return scan;
    if (t[i] == ']') break;
    const size_t start = i;
    while (i < t.size() && ident_char(t[i], true)) ++i;
    if (i >= t.size()) return scan;
    CallScan c;
    c.name = t.substr(start, i - start);
    if (c.name.empty() || t[i] != '(') return scan;
    ++i;
    c.has_name = true;
    scan.calls.push_back(c);
    if (pythonic_arguments(t, i, py, scan.calls.back()) != Step::kDone) return scan;
    py.skip(i);
    if (i < t.size() && t[i] == ',') ++i;
  }
  ++i;
  py.skip(i);
  scan.complete = i == t.size();
  return scan;
}

ToolScan scan_tool_calls(const std::string& parser, const std::string& text, bool final) {
  if (parser == "hermes") return scan_hermes(text, final);
  if (parser == "llama3_json") return scan_llama3_json(text, final);
  if (parser == "mistral") return scan_mistral(text, final);
  if (parser == "pythonic") return scan_pythonic(text, final);
  ToolScan none;
  none.content_end = text.size();
  none.complete = true;
  return none;
}

ParsedOutput parse_tool_calls(const std::string& parser, const std::string& text) {
  const ToolScan scan = scan_tool_calls(parser, text, true);
  if (scan.calls.empty() && !scan.complete) return {text, {}};
  ParsedOutput out{text.substr(0, scan.content_end), {}};
  for (const CallScan& c : scan.calls) out.calls.push_back({c.name, c.arguments});
  return out;
}

}  // namespace gs
