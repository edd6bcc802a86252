// Sequence filters: first, last, join, items, list, select/reject(attr), map, unique, sort, ...
#include <algorithm>

#include "core/error.h"
#include "tokenizer/jinja/args.h"
#include "tokenizer/jinja/filters.h"
#include "tokenizer/jinja/is_tests.h"
#include "tokenizer/jinja/members.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {
namespace {

// Jinja2's attribute getter: "a.b.0" looks up each part as an item (integers as indexes).
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric && part.size() < 18 ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part))))
                                      : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value first(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "first", {});
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value last(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "last", {});
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value join(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "join", {"d", "attribute"});
  const std::string sep = b.has(0) ? to_str(b.get(0)) : "";
  std::string out;
  bool first_item = true;
  for (const auto& e : iterate(v)) {
    if (!first_item) out += sep;
    first_item = false;
    out += to_str(b.has(1) ? attr_path(e, to_str(b.get(1))) : e);
  }
  return Value(std::move(out));
}

Value items(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "items", {});
  if (v.is_undefined()) return Value(List{});
  GS_CHECK(v.is_dict(), "items(): expected a mapping, got {}", type_name(v));
  List out;
  for (const auto& [k, e] : v.as_dict()) out.emplace_back(List{Value(k), e});
  return Value(std::move(out));
}

Value list(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "list", {});
  return Value(iterate(v));
}

// select/reject/selectattr/rejectattr share one shape: keep items whose test result == keep.
Value select_impl(const Value& v, const CallArgs& a, bool by_attr, bool keep, const char* fn) {
  GS_CHECK(a.kwargs.empty(), "{}() takes no keyword arguments", fn);
  size_t i = 0;
  std::string attr;
  if (by_attr) {
    GS_CHECK(!a.args.empty(), "{}() missing the attribute name", fn);
    attr = to_str(a.args[i++]);
  }
  std::string test;
  if (i < a.args.size()) test = string_arg(a.args[i++], fn, "test");
  CallArgs test_args;
  test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(i), a.args.end());
  List out;
  for (const auto& e : iterate(v)) {
    const Value x = by_attr ? attr_path(e, attr) : e;
    const bool r = test.empty() ? x.truthy() : apply_test(test, x, test_args);
    if (r == keep) out.push_back(e);
  }
  return Value(std::move(out));
}

Value map(const Value& v, const CallArgs& a) {
  std::optional<std::string> attribute;
  Value fallback;
  for (const auto& [k, x] : a.kwargs) {
    if (k == "attribute")
      attribute = to_str(x);
    else if (k == "default")
      fallback = x;
    else
      fail("map() got an unexpected keyword argument '{}'", k);
  }
  List out;
  if (attribute) {
    for (const auto& e : iterate(v)) {
      Value r = attr_path(e, *attribute);
      out.push_back(r.is_undefined() && !fallback.is_undefined() ? fallback : r);
    }
    return Value(std::move(out));
  }
  GS_CHECK(!a.args.empty(), "map() needs a filter name or attribute=");
  const std::string filter = string_arg(a.args[0], "map", "filter");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  for (const auto& e : iterate(v)) out.push_back(apply_filter(filter, e, rest));
  return Value(std::move(out));
}

// Sort/unique key: strings compare case-insensitively unless case_sensitive.
Value sort_key(const Value& e, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_undefined() || attribute.is_none() ? e : attr_path(e, to_str(attribute));
  if (!case_sensitive && k.is_string()) return Value(to_lower(k.as_string()));
  return k;
}

Value unique(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "unique", {"case_sensitive", "attribute"});
  List out, keys;
  for (const auto& e : iterate(v)) {
    Value k = sort_key(e, b.get(1), b.get(0).truthy());
    if (std::any_of(keys.begin(), keys.end(), [&](const Value& x) { return x.equals(k); })) continue;
    keys.push_back(std::move(k));
    out.push_back(e);
  }
  return Value(std::move(out));
}

Value sort(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "sort", {"reverse", "case_sensitive", "attribute"});
  List out = iterate(v);
  const bool rev = b.get(0).truthy();
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    const int c = compare(sort_key(x, b.get(2), b.get(1).truthy()), sort_key(y, b.get(2), b.get(1).truthy()), "<");
    return rev ? c > 0 : c < 0;
  });
  return Value(std::move(out));
}

Value reverse(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "reverse", {});
  if (v.is_string()) {
    const List chars = iterate(v);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
    return Value(std::move(out));
  }
  List out = iterate(v);
  std::reverse(out.begin(), out.end());
  return Value(std::move(out));
}

Value extreme(const Value& v, const CallArgs& a, bool want_max) {
  ArgBinder b(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const List xs = iterate(v);
  if (xs.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &xs[0];
  for (const auto& x : xs) {
    const int c = compare(sort_key(x, b.get(1), b.get(0).truthy()), sort_key(*best, b.get(1), b.get(0).truthy()), "<");
    if (want_max ? c > 0 : c < 0) best = &x;
  }
  return *best;
}

Value sum(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "sum", {"attribute", "start"});
  Value total = b.get_or(1, Value(0));
  for (const auto& e : iterate(v)) total = binary_op("+", total, b.has(0) ? attr_path(e, to_str(b.get(0))) : e);
  return total;
}

Value dictsort(const Value& v, const CallArgs& a) {
  ArgBinder b(a, "dictsort", {"case_sensitive", "by", "reverse"});
  GS_CHECK(v.is_dict(), "dictsort(): expected a mapping, got {}", type_name(v));
  const bool by_value = b.has(1) && to_str(b.get(1)) == "value";
  Dict d = v.as_dict();
  std::stable_sort(d.begin(), d.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by_value ? x.second : Value(x.first), Value(), b.get(0).truthy());
    const Value ky = sort_key(by_value ? y.second : Value(y.first), Value(), b.get(0).truthy());
    const int c = compare(kx, ky, "<");
    return b.get(2).truthy() ? c > 0 : c < 0;
  });
  List out;
  for (auto& [k, e] : d) out.emplace_back(List{Value(k), e});
  return Value(std::move(out));
}

}  // namespace

void add_sequence_filters(FilterTable& t) {
  t["first"] = first;
  t["last"] = last;
  t["join"] = join;
  t["items"] = items;
  t["list"] = list;
  t["select"] = [](const Value& v, const CallArgs& a) { return select_impl(v, a, false, true, "select"); };
  t["reject"] = [](const Value& v, const CallArgs& a) { return select_impl(v, a, false, false, "reject"); };
  t["selectattr"] = [](const Value& v, const CallArgs& a) { return select_impl(v, a, true, true, "selectattr"); };
  t["rejectattr"] = [](const Value& v, const CallArgs& a) { return select_impl(v, a, true, false, "rejectattr"); };
  t["map"] = map;
  t["unique"] = unique;
  t["sort"] = sort;
  t["reverse"] = reverse;
  t["min"] = [](const Value& v, const CallArgs& a) { return extreme(v, a, false); };
  t["max"] = [](const Value& v, const CallArgs& a) { return extreme(v, a, true); };
  t["sum"] = sum;
  t["dictsort"] = dictsort;
}

}  // namespace gs::jinja
