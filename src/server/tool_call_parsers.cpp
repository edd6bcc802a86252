// The tool-call parsers of server/tool_calls.h (parse_tool_calls): the model's text -> calls.
#include <cctype>

#include "server/tool_calls.h"

namespace gs {

namespace {

using Json = nlohmann::ordered_json;

// End (one past) of the JSON object or array starting at s[i], honouring strings; npos if open.
size_t json_extent(const std::string& s, size_t i) {
  int depth = 0;
  bool in_str = false;
  for (size_t k = i; k < s.size(); ++k) {
    char c = s[k];
    if (in_str) {
      if (c == '\\')
        ++k;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return std::string::npos;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// {"name": ..., "arguments" | "parameters": {...}} -> a call.
bool to_call(const Json& j, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  out.name = j["name"];
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  const Json args = j.contains(key) ? j[key] : Json::object();
  out.arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return true;
}

// Content is the text before the first call (as vLLM's parser: what streaming has sent).
ParsedOutput hermes(const std::string& text) {
  ParsedOutput out;
  const std::string open = "<tool_call>", close = "</tool_call>";
  size_t at = 0;
  for (;;) {
    size_t s = text.find(open, at);
    if (s == std::string::npos) {
      if (at == 0) out.content = text;
      break;
    }
    if (at == 0) out.content = text.substr(0, s);
    size_t e = text.find(close, s);
    std::string body = text.substr(s + open.size(), e == std::string::npos ? std::string::npos : e - s - open.size());
    ToolCall call;
    Json j = Json::parse(trim(body), nullptr, false);
    if (j.is_discarded() || !to_call(j, call)) return {text, {}};
    out.calls.push_back(std::move(call));
    if (e == std::string::npos) break;
    at = e + close.size();
  }
  return out;
}

ParsedOutput llama3_json(const std::string& text) {
  std::string t = trim(text);
  if (t.rfind("<|python_tag|>", 0) == 0) t = trim(t.substr(14));
  if (t.empty() || t[0] != '{') return {text, {}};
  ParsedOutput out;
  size_t i = 0;
  while (i < t.size()) {
    size_t e = json_extent(t, i);
    if (e == std::string::npos) return {text, {}};
    ToolCall call;
    Json j = Json::parse(t.substr(i, e - i), nullptr, false);
    if (j.is_discarded() || !to_call(j, call)) return {text, {}};
    out.calls.push_back(std::move(call));
    i = e;
    while (i < t.size() && (std::isspace(static_cast<unsigned char>(t[i])) || t[i] == ';')) ++i;
    if (i < t.size() && t[i] != '{') return {text, {}};
  }
  return out;
}

ParsedOutput mistral(const std::string& text) {
  const std::string marker = "[TOOL_CALLS]";
  size_t m = text.find(marker);
  if (m == std::string::npos) return {text, {}};
  ParsedOutput out;
  out.content = text.substr(0, m);
  std::string rest = trim(text.substr(m + marker.size()));
  Json j = Json::parse(rest, nullptr, false);
  if (j.is_discarded()) return {text, {}};
  if (j.is_object()) j = Json::array({j});
  for (const auto& c : j) {
    ToolCall call;
    if (!to_call(c, call)) return {text, {}};
    out.calls.push_back(std::move(call));
  }
  return out;
}

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

// [f(a=1, b="x"), g()]
ParsedOutput pythonic(const std::string& text) {
  std::string t = trim(text);
  if (t.size() < 2 || t.front() != '[' || t.back() != ']') return {text, {}};
  ParsedOutput out;
  PyLiteral py(t);
  size_t i = 1;
  for (;;) {
    py.skip(i);
    if (i < t.size() && t[i] == ']') break;
    size_t start = i;
    while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' || t[i] == '.')) ++i;
    ToolCall call;
    call.name = t.substr(start, i - start);
    if (call.name.empty() || i >= t.size() || t[i] != '(') return {text, {}};
    ++i;
    Json args = Json::object();
    for (;;) {
      py.skip(i);
      if (i < t.size() && t[i] == ')') break;
      size_t k = i;
      while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_')) ++i;
      std::string key = t.substr(k, i - k);
      py.skip(i);
      if (key.empty() || i >= t.size() || t[i] != '=') return {text, {}};
      ++i;
      Json v;
      if (!py.value(i, v)) return {text, {}};
      args[key] = v;
      py.skip(i);
      if (i < t.size() && t[i] == ',') ++i;
    }
    ++i;
    call.arguments = args.dump();
    out.calls.push_back(std::move(call));
    py.skip(i);
    if (i < t.size() && t[i] == ',') ++i;
  }
  return out;
}

}  // namespace

ParsedOutput parse_tool_calls(const std::string& parser, const std::string& text) {
  if (parser == "hermes") return hermes(text);
  if (parser == "llama3_json") return llama3_json(text);
  if (parser == "mistral") return mistral(text);
  if (parser == "pythonic") return pythonic(text);
  return {text, {}};
}

}  // namespace gs
