// Implements tokenizer/jinja/value_text.h.
#include "tokenizer/jinja/value_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja/utf8.h"

namespace gs::jinja {
namespace {

constexpr int kMaxDepth = 512;  // nesting that str()/tojson will walk before giving up

void check_depth(int depth) {
  GS_CHECK(depth < kMaxDepth, "value nested deeper than {} levels cannot be printed", kMaxDepth);
}

void repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char q = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  out += q;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += q;
}

void repr_into(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  if (v.is_string()) {
    repr_string(out, v.as_string());
  } else if (v.is_list()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.as_list()) {
      if (!first) out += ", ";
      first = false;
      repr_into(out, e, depth + 1);
    }
    out += ']';
  } else if (v.is_dict()) {
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v.as_dict()) {
      if (!first) out += ", ";
      first = false;
      repr_string(out, k);
      out += ": ";
      repr_into(out, e, depth + 1);
    }
    out += '}';
  } else if (v.is_undefined()) {
    out += "Undefined";
  } else {
    out += to_str(v);
  }
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20)
          out += fmt::format("\\u{:04x}", u);
        else
          out += c;
    }
  }
  out += '"';
}

void newline_indent(std::string& out, const JsonStyle& st, int level) {
  out += '\n';
  out.append(static_cast<size_t>(*st.indent) * static_cast<size_t>(level), ' ');
}

void json_into(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  check_depth(depth);
  const bool pretty = st.indent.has_value();
  const char* item_sep = pretty ? "," : ", ";
  if (v.is_list() && !v.as_list().empty()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.as_list()) {
      if (!first) out += item_sep;
      first = false;
      if (pretty) newline_indent(out, st, depth + 1);
      json_into(out, e, st, depth + 1);
    }
    if (pretty) newline_indent(out, st, depth);
    out += ']';
  } else if ((v.is_dict() && !v.as_dict().empty()) || v.is_namespace()) {
    Dict d = v.is_dict() ? v.as_dict() : v.as_namespace().attrs;
    if (st.sort_keys)
      std::stable_sort(d.begin(), d.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    bool first = true;
    for (const auto& [k, e] : d) {
      if (!first) out += item_sep;
      first = false;
      if (pretty) newline_indent(out, st, depth + 1);
      json_string(out, k);
      out += ": ";
      json_into(out, e, st, depth + 1);
    }
    if (pretty) newline_indent(out, st, depth);
    out += '}';
  } else if (v.is_list()) {
    out += "[]";
  } else if (v.is_dict()) {
    out += "{}";
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_double();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : format_float(d);
  } else {
    fail("Object of type {} is not JSON serializable", type_name(v));
  }
}

}  // namespace

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e+02"
  const size_t e_pos = sci.find('e');
  const int exp = std::stoi(sci.substr(e_pos + 1));
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return format_float(v.as_double());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict: return to_repr(v);
    case Value::Kind::Namespace: return "<Namespace " + to_repr(Value(v.as_namespace().attrs)) + ">";
    case Value::Kind::Callable: return "<function " + v.as_callable().name + ">";
  }
  return "";
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_into(out, v, style, 0);
  return out;
}

}  // namespace gs::jinja
