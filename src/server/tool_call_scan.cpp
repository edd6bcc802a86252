// The JSON tool-call scanners of server/tool_call_scan.h (hermes, llama3_json, mistral and the
// "required" tool_choice's list): a call is a JSON object with a "name" and its arguments.
#include "server/tool_call_scan.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <initializer_list>

namespace gs {

namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string::npos;

void skip_ws(const std::string& s, size_t& i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}

// End (one past) of the JSON string opening at s[i]; npos while it is open.
size_t string_end(const std::string& s, size_t i) {
  for (size_t k = i + 1; k < s.size(); ++k) {
    if (s[k] == '\\')
      ++k;
    else if (s[k] == '"')
      return k + 1;
  }
  return npos;
}

// End of the JSON value starting at s[i]: an object or array (balanced, honouring strings), a
// string, or a scalar (up to a delimiter; at the end of a text that is not final it may go on).
size_t value_end(const std::string& s, size_t i, bool final) {
  if (s[i] == '"') return string_end(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (size_t k = i; k < s.size(); ++k) {
      if (s[k] == '"') {
        k = string_end(s, k);
        if (k == npos) return npos;
        --k;
      } else if (s[k] == '{' || s[k] == '[') {
        ++depth;
      } else if ((s[k] == '}' || s[k] == ']') && --depth == 0) {
        return k + 1;
      }
    }
    return npos;
  }
  size_t k = i;
  while (k < s.size() && !std::isspace(static_cast<unsigned char>(s[k])) && s[k] != ',' && s[k] != '}' && s[k] != ']')
    ++k;
  return k < s.size() || final ? k : npos;
}

enum class Step { kOpen, kDone, kBad };  // the text ends inside / the item is complete / not a call

bool is_arg_key(const std::string& key, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

// Reads the call object at s[i]: its "name" and its arguments (the first of `arg_keys`; "{}" when
// absent). On kDone, i is one past the object. `out` holds what is known even when kOpen.
Step call_object(const std::string& s, size_t& i, bool final, std::initializer_list<const char*> arg_keys,
                 CallScan& out) {
  if (i >= s.size()) return Step::kOpen;
  if (s[i] != '{') return Step::kBad;
  size_t k = i + 1;
  bool have_args = false;
  for (;;) {
    skip_ws(s, k);
    if (k >= s.size()) return Step::kOpen;
    if (s[k] == '}') break;
    if (s[k] != '"') return Step::kBad;
    const size_t key_end = string_end(s, k);
    if (key_end == npos) return Step::kOpen;
    const Json key = Json::parse(s.begin() + k, s.begin() + key_end, nullptr, false);
    if (!key.is_string()) return Step::kBad;
    k = key_end;
    skip_ws(s, k);
    if (k >= s.size()) return Step::kOpen;
    if (s[k] != ':') return Step::kBad;
    ++k;
    skip_ws(s, k);
    if (k >= s.size()) return Step::kOpen;
    const size_t end = value_end(s, k, final);
    const std::string& name = key.get_ref<const std::string&>();
    if (name == "name" && !out.has_name) {
      if (s[k] != '"') return Step::kBad;
      if (end == npos) return Step::kOpen;
      const Json v = Json::parse(s.begin() + k, s.begin() + end, nullptr, false);
      if (!v.is_string()) return Step::kBad;
      out.name = v.get<std::string>();
      out.has_name = true;
    } else if (!have_args && is_arg_key(name, arg_keys)) {
      have_args = true;
      if (s[k] == '{' || s[k] == '[') {
        out.arguments = s.substr(k, end == npos ? npos : end - k);  // the model's own text
      } else if (end != npos) {
        const Json v = Json::parse(s.begin() + k, s.begin() + end, nullptr, false);
        if (v.is_discarded()) return Step::kBad;
        out.arguments = v.is_string() ? v.get<std::string>() : v.dump();
      }
    }
    if (end == npos) return Step::kOpen;
    k = end;
    skip_ws(s, k);
    if (k >= s.size()) return Step::kOpen;
    if (s[k] == '}') break;
    if (s[k] != ',') return Step::kBad;
    ++k;
  }
  ++k;
  if (!out.has_name || Json::parse(s.begin() + i, s.begin() + k, nullptr, false).is_discarded()) return Step::kBad;
  if (!have_args) out.arguments = "{}";
  out.done = true;
  i = k;
  return Step::kDone;
}

// Reads one call at s[i] into scan.calls (once its name is known); false unless it is complete.
bool read_call(const std::string& s, size_t& i, bool final, std::initializer_list<const char*> arg_keys,
               ToolScan& scan) {
  CallScan c;
  const Step step = call_object(s, i, final, arg_keys, c);
  if (c.has_name) scan.calls.push_back(std::move(c));  // streaming opened it: it stays, even if cut short
  return step == Step::kDone;
}

// A JSON list of calls at s[i] ('[' ... ']'), to the end of the text.
void call_list(const std::string& s, size_t i, bool final, std::initializer_list<const char*> arg_keys,
               ToolScan& scan) {
  ++i;
  skip_ws(s, i);
  if (i < s.size() && s[i] == ']') {
    ++i;
  } else {
    for (;;) {
      skip_ws(s, i);
      if (!read_call(s, i, final, arg_keys, scan)) return;
      skip_ws(s, i);
      if (i >= s.size() || (s[i] != ',' && s[i] != ']')) return;
      if (s[i++] == ']') break;
    }
  }
  skip_ws(s, i);
  scan.complete = i == s.size();
}

// Content until `marker`, held back while the text ends with a part of it.
bool content_until(const std::string& text, const std::string& marker, bool final, size_t& at, ToolScan& scan) {
  at = text.find(marker);
  if (at != npos) {
    scan.content_end = at;
    return true;
  }
  scan.content_end = final ? text.size() : text.size() - marker_holdback(text, marker);
  scan.complete = true;
  return false;
}

}  // namespace

size_t marker_holdback(const std::string& s, const std::string& marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, marker, 0, n) == 0) return n;
  return 0;
}

// Content is the text before the first call; text between and after calls is dropped (as vLLM).
// A call's closing tag may be missing at the end of the output.
ToolScan scan_hermes(const std::string& text, bool final) {
  static const std::string open = "<tool_call>", close = "</tool_call>";
  ToolScan scan;
  size_t at = 0;
  if (!content_until(text, open, final, at, scan)) return scan;
  for (;;) {
    size_t i = at + open.size();
    skip_ws(text, i);
    if (!read_call(text, i, final, {"arguments", "parameters"}, scan)) return scan;
    skip_ws(text, i);
    if (i < text.size() && text.compare(i, close.size(), close) != 0) return scan;  // or the tag is arriving
    at = i >= text.size() ? npos : text.find(open, i + close.size());
    if (at == npos) {
      scan.complete = true;
      return scan;
    }
  }
}

// The output is calls only: optional <|python_tag|>, then objects separated by ';'. Anything else
// is content (decided by its first non-blank character, held back until it comes).
ToolScan scan_llama3_json(const std::string& text, bool final) {
  static const std::string tag = "<|python_tag|>";
  ToolScan scan;
  size_t i = 0;
  skip_ws(text, i);
  if (i == text.size()) {
    scan.content_end = final ? text.size() : 0;
    scan.complete = true;
    return scan;
  }
  if (text.compare(i, tag.size(), tag) == 0) {
    i += tag.size();
    skip_ws(text, i);
    if (i == text.size()) return scan;
  } else if (!final && text.size() - i < tag.size() && tag.compare(0, text.size() - i, text, i) == 0) {
    return scan;  // the tag may be arriving
  }
  if (text[i] != '{') {
    scan.content_end = text.size();
    scan.complete = true;
    return scan;
  }
  for (;;) {
    if (!read_call(text, i, final, {"arguments", "parameters"}, scan)) return scan;
    while (i < text.size() && (std::isspace(static_cast<unsigned char>(text[i])) || text[i] == ';')) ++i;
    if (i == text.size()) break;
    if (text[i] != '{') return scan;
  }
  scan.complete = true;
  return scan;
}

// Content before [TOOL_CALLS]; after it, one call object or a list of them, to the end.
ToolScan scan_mistral(const std::string& text, bool final) {
  static const std::string marker = "[TOOL_CALLS]";
  ToolScan scan;
  size_t at = 0;
  if (!content_until(text, marker, final, at, scan)) return scan;
  size_t i = at + marker.size();
  skip_ws(text, i);
  if (i >= text.size()) return scan;
  if (text[i] == '[') {
    call_list(text, i, final, {"arguments", "parameters"}, scan);
  } else if (read_call(text, i, final, {"arguments", "parameters"}, scan)) {
    skip_ws(text, i);
    scan.complete = i == text.size();
  }
  return scan;
}

ToolScan scan_required_calls(const std::string& text, bool final) {
  ToolScan scan;
  size_t i = 0;
  skip_ws(text, i);
  if (i < text.size() && text[i] == '[') call_list(text, i, final, {"parameters"}, scan);
  return scan;
}

}  // namespace gs
