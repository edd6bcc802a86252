// Scalar filters (strings, numbers, conversions) and the filter registry.
#include "tokenizer/jinja/filters.h"

#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja/args.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/utf8.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {
namespace {

const FilterTable& table() {
  static const FilterTable t = [] {
    FilterTable m;
    add_scalar_filters(m);
    add_sequence_filters(m);
    return m;
  }();
  return t;
}

Value trim(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "trim", {"chars"});
  if (!b.has(0) || b.get(0).is_none()) return Value(strip(to_str(v), true, true));
  return Value(strip_chars(to_str(v), string_arg(b.get(0), "trim", "chars"), true, true));
}

Value tojson(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  GS_CHECK(!b.get(0).truthy(), "tojson(ensure_ascii=True) is not supported");
  GS_CHECK(!b.has(2) || b.get(2).is_none(), "tojson(separators=...) is not supported");
  JsonStyle style;
  if (b.has(1) && !b.get(1).is_none()) {
    const int64_t n = int_arg(b.get(1), "tojson", "indent");
    GS_CHECK(n >= 0 && n <= 64, "tojson(): indent must be in [0, 64], got {}", n);
    style.indent = static_cast<int>(n);
  }
  style.sort_keys = b.get(3).truthy();
  return Value(to_json(v, style));
}

Value length_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "length", {});
  return Value(length(v));
}

template <std::string (*F)(const std::string&)>
Value string_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "string filter", {});
  return Value(F(to_str(v)));
}

std::string identity(const std::string& s) { return s; }

Value default_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "default", {"default_value", "boolean"});
  if (v.is_undefined() || (b.get(1).truthy() && !v.truthy())) return b.get_or(0, Value(""));
  return v;
}

std::optional<int64_t> parse_int(std::string s, int base) {
  s = strip(s, true, true);
  std::string digits;
  for (const char c : s)
    if (c != '_') digits += c;
  if (digits.empty()) return std::nullopt;
  size_t used = 0;
  try {
    const int64_t r = std::stoll(digits, &used, base);
    if (used == digits.size()) return r;
  } catch (const std::exception&) {}
  return std::nullopt;
}

std::optional<double> parse_float(const std::string& s) {
  const std::string t = strip(s, true, true);
  if (t.empty()) return std::nullopt;
  size_t used = 0;
  try {
    const double d = std::stod(t, &used);
    if (used == t.size()) return d;
  } catch (const std::exception&) {}
  return std::nullopt;
}

Value int_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "int", {"default", "base"});
  const Value fallback = b.get_or(0, Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  const int base = b.has(1) ? static_cast<int>(int_arg(b.get(1), "int", "base")) : 10;
  GS_CHECK(base >= 2 && base <= 36, "int(): base must be in [2, 36], got {}", base);
  if (auto i = parse_int(v.as_string(), base)) return Value(*i);
  if (auto d = parse_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
    return Value(static_cast<int64_t>(*d));
  return fallback;
}

Value float_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "float", {"default"});
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string())
    if (auto d = parse_float(v.as_string())) return Value(*d);
  return b.get_or(0, Value(0.0));
}

Value replace_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "replace", {"old", "new", "count"});
  return Value(replace_all(to_str(v), to_str(b.required(0)), to_str(b.required(1)),
                           b.has(2) && !b.get(2).is_none() ? int_arg(b.get(2), "replace", "count") : -1));
}

Value abs_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "abs", {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  const int64_t i = int_arg(v, "abs", "value");
  GS_CHECK(i != INT64_MIN, "integer overflow in abs()");
  return Value(i < 0 ? -i : i);
}

Value round_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "round", {"precision", "method"});
  GS_CHECK(v.is_number(), "round(): expected a number, got {}", type_name(v));
  const int64_t p = b.has(0) ? int_arg(b.get(0), "round", "precision") : 0;
  GS_CHECK(p >= -15 && p <= 15, "round(): precision must be in [-15, 15], got {}", p);
  const std::string method = b.has(1) ? string_arg(b.get(1), "round", "method") : "common";
  const double scale = std::pow(10.0, static_cast<double>(p));
  const double x = v.as_double() * scale;
  double r = 0;
  if (method == "common")
    r = std::nearbyint(x);  // Python's round(): halves go to even
  else if (method == "floor")
    r = std::floor(x);
  else if (method == "ceil")
    r = std::ceil(x);
  else
    fail("round(): method must be 'common', 'floor' or 'ceil', got '{}'", method);
  return Value(r / scale);
}

Value escape_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "escape", {});
  std::string out;
  for (const char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value indent_filter(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "indent", {"width", "first", "blank"});
  const Value width = b.get_or(0, Value(4));
  const std::string pad =
      width.is_string()
          ? width.as_string()
          : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(width, "indent", "width"), 0, 1024)), ' ');
  std::vector<std::string> lines;
  const std::string s = to_str(v);
  size_t start = 0;
  for (size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', start)) {
    lines.push_back(s.substr(start, at - start));
    start = at + 1;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  if (lines.empty()) lines.emplace_back();
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i)
    out += "\n" + ((b.get(2).truthy() || !lines[i].empty()) ? pad : "") + lines[i];
  if (b.get(1).truthy()) out = pad + out;
  return Value(std::move(out));
}

}  // namespace

void add_scalar_filters(FilterTable& t) {
  t["trim"] = trim;
  t["tojson"] = tojson;
  t["length"] = length_filter;
  t["count"] = length_filter;
  t["upper"] = string_filter<to_upper>;
  t["lower"] = string_filter<to_lower>;
  t["title"] = string_filter<to_title>;
  t["capitalize"] = string_filter<capitalize>;
  t["string"] = string_filter<identity>;
  t["safe"] = [](const Value& v, const CallArgs& a) {
    ArgBinder b(a, "safe", {});
    return v;
  };
  t["default"] = default_filter;
  t["d"] = default_filter;
  t["int"] = int_filter;
  t["float"] = float_filter;
  t["replace"] = replace_filter;
  t["abs"] = abs_filter;
  t["round"] = round_filter;
  t["escape"] = escape_filter;
  t["e"] = escape_filter;
  t["indent"] = indent_filter;
}

bool has_filter(const std::string& name) { return table().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args) {
  const auto it = table().find(name);
  GS_CHECK(it != table().end(), "no filter named '{}'", name);
  return it->second(v, args);
}

}  // namespace gs::jinja
