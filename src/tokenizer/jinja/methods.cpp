// Implements tokenizer/jinja/methods.h.
#include "tokenizer/jinja/methods.h"

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/jinja/args.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/utf8.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {
namespace {

template <typename F>
std::string map_code_points(const std::string& s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0, len = 0; i < s.size(); i += len) append_utf8(out, f(decode_at(s, i, len)));
  return out;
}

char32_t upper_cp(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t lower_cp(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
bool is_cased_letter(char32_t c) { return upper_cp(c) != c || lower_cp(c) != c; }

Value method(const Value& self, std::string name, std::function<Value(const Value&, const CallArgs&)> fn) {
  return Value(Callable{name, [self, fn = std::move(fn)](const CallArgs& a) { return fn(self, a); }});
}

std::vector<std::string> split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {  // runs of whitespace, no empty parts
    size_t i = 0, len = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space_at(s, i, len)) i += len;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(strip(s.substr(i), false, true));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space_at(s, j, len)) j += len;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  const std::string& d = string_arg(sep, "split", "sep");
  GS_CHECK(!d.empty(), "split(): empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + d.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, const char* fn) {
  auto one = [&](const Value& v) {
    const std::string& a = string_arg(v, fn, "prefix");
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const auto& v : affix.as_list())
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

// str.format: "{}", "{0}", "{name}" with no format specs.
std::string format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (f[i] != '{') {
      out += f[i];
      continue;
    }
    const size_t close = f.find('}', i);
    GS_CHECK(close != std::string::npos, "format(): single '{{' in format string");
    const std::string field = f.substr(i + 1, close - i - 1);
    GS_CHECK(field.find(':') == std::string::npos && field.find('!') == std::string::npos,
             "format(): format specs ('{{{}}}') are not supported", field);
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      const size_t idx = field.empty() ? auto_index++ : std::stoul(field);
      GS_CHECK(idx < a.args.size(), "format(): replacement index {} out of range", idx);
      v = &a.args[idx];
    } else {
      for (const auto& [k, x] : a.kwargs)
        if (k == field) v = &x;
      GS_CHECK(v != nullptr, "format(): missing keyword argument '{}'", field);
    }
    out += to_str(*v);
    i = close;
  }
  return out;
}

template <typename Pred>
bool all_chars(const std::string& s, Pred p) {
  if (s.empty()) return false;
  for (size_t i = 0, len = 0; i < s.size(); i += len)
    if (!p(decode_at(s, i, len))) return false;
  return true;
}

std::optional<Value> string_method(const Value& self, const std::string& name) {
  using A = const CallArgs&;
  auto strip_fn = [name](bool l, bool r) {
    return [name, l, r](const Value& s, A a) {
      ArgBinder b(a, name, {"chars"});
      if (!b.has(0) || b.get(0).is_none()) return Value(strip(s.as_string(), l, r));
      return Value(strip_chars(s.as_string(), string_arg(b.get(0), name, "chars"), l, r));
    };
  };
  if (name == "strip") return method(self, name, strip_fn(true, true));
  if (name == "lstrip") return method(self, name, strip_fn(true, false));
  if (name == "rstrip") return method(self, name, strip_fn(false, true));
  auto unary = [&](std::string (*f)(const std::string&)) {
    return method(self, name, [name, f](const Value& s, A a) {
      ArgBinder b(a, name, {});
      return Value(f(s.as_string()));
    });
  };
  if (name == "upper") return unary(to_upper);
  if (name == "lower") return unary(to_lower);
  if (name == "title") return unary(to_title);
  if (name == "capitalize") return unary(capitalize);
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method(self, name, [name, prefix](const Value& s, A a) {
      ArgBinder b(a, name, {"prefix"});
      return Value(affix_match(s.as_string(), b.required(0), prefix, name.c_str()));
    });
  }
  if (name == "split") {
    return method(self, name, [](const Value& s, A a) {
      ArgBinder b(a, "split", {"sep", "maxsplit"});
      List out;
      for (auto& p : split(s.as_string(), b.get(0), b.has(1) ? int_arg(b.get(1), "split", "maxsplit") : -1))
        out.emplace_back(std::move(p));
      return Value(std::move(out));
    });
  }
  if (name == "replace") {
    return method(self, name, [](const Value& s, A a) {
      ArgBinder b(a, "replace", {"old", "new", "count"});
      return Value(replace_all(s.as_string(), string_arg(b.required(0), "replace", "old"),
                               string_arg(b.required(1), "replace", "new"),
                               b.has(2) ? int_arg(b.get(2), "replace", "count") : -1));
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return method(self, name, [find](const Value& s, A a) {
      ArgBinder b(a, find ? "find" : "count", {"sub"});
      const std::string& sub = string_arg(b.required(0), "find", "sub");
      const std::string& str = s.as_string();
      if (find) {
        const size_t at = str.find(sub);
        return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(code_point_count(str.substr(0, at))));
      }
      if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(str) + 1));
      int64_t n = 0;
      for (size_t at = str.find(sub); at != std::string::npos; at = str.find(sub, at + sub.size())) ++n;
      return Value(n);
    });
  }
  if (name == "join") {
    return method(self, name, [](const Value& s, A a) {
      ArgBinder b(a, "join", {"iterable"});
      std::string out;
      bool first = true;
      for (const auto& e : iterate(b.required(0))) {
        GS_CHECK(e.is_string(), "join(): sequence item must be str, got {}", type_name(e));
        if (!first) out += s.as_string();
        first = false;
        out += e.as_string();
      }
      return Value(std::move(out));
    });
  }
  if (name == "format") return method(self, name, [](const Value& s, A a) { return Value(format(s.as_string(), a)); });
  auto predicate = [&](bool (*p)(char32_t)) {
    return method(self, name, [p](const Value& s, A) { return Value(all_chars(s.as_string(), p)); });
  };
  if (name == "isdigit") return predicate([](char32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha")
    return predicate([](char32_t c) {
      const auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
    });
  if (name == "isspace")
    return predicate([](char32_t c) {
      std::string t;
      append_utf8(t, c);
      size_t l = 0;
      return is_space_at(t, 0, l);
    });
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  using A = const CallArgs&;
  if (name == "items" || name == "keys" || name == "values") {
    return method(self, name, [name](const Value& d, A a) {
      ArgBinder b(a, name, {});
      List out;
      for (const auto& [k, v] : d.as_dict()) {
        if (name == "items")
          out.emplace_back(List{Value(k), v});
        else if (name == "keys")
          out.emplace_back(k);
        else
          out.push_back(v);
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return method(self, name, [](const Value& d, A a) {
      ArgBinder b(a, "get", {"key", "default"});
      const Value& key = b.required(0);
      const Value* v = key.is_string() ? d.find(key.as_string()) : nullptr;
      return v ? *v : b.get_or(1, Value(nullptr));
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  using A = const CallArgs&;
  if (name == "index" || name == "count") {
    return method(self, name, [name](const Value& l, A a) {
      ArgBinder b(a, name, {"value"});
      int64_t n = 0;
      for (size_t i = 0; i < l.as_list().size(); ++i) {
        if (!l.as_list()[i].equals(b.required(0))) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++n;
      }
      GS_CHECK(name == "count", "list.index(x): x not in list");
      return Value(n);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return std::nullopt;
}

std::string to_upper(const std::string& s) { return map_code_points(s, upper_cp); }
std::string to_lower(const std::string& s) { return map_code_points(s, lower_cp); }

std::string to_title(const std::string& s) {
  bool prev_cased = false;
  return map_code_points(s, [&](char32_t c) {
    const char32_t r = prev_cased ? lower_cp(c) : upper_cp(c);
    prev_cased = is_cased_letter(c);
    return r;
  });
}

std::string capitalize(const std::string& s) {
  bool first = true;
  return map_code_points(s, [&](char32_t c) {
    const char32_t r = first ? upper_cp(c) : lower_cp(c);
    first = false;
    return r;
  });
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between code points
    const auto offs = code_point_offsets(s);
    for (size_t i = 0; i + 1 < offs.size() + 1; ++i) {
      if (count < 0 || static_cast<int64_t>(i) < count) out += to;
      if (i + 1 < offs.size()) out += s.substr(offs[i], offs[i + 1] - offs[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t at = s.find(from); at != std::string::npos && (count < 0 || n < count); at = s.find(from, start), ++n) {
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
  }
  out += s.substr(start);
  return out;
}

}  // namespace gs::jinja
