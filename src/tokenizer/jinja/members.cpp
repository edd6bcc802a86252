// Implements tokenizer/jinja/members.h.
#include "tokenizer/jinja/members.h"

#include "core/error.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/utf8.h"

namespace gs::jinja {
namespace {

std::string object_name(const Value& v) { return std::string(type_name(v)) + " object"; }

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_name(obj), name));
}

// Python's slice.indices(): clamps bounds and returns the visited positions.
std::vector<size_t> slice_positions(size_t n, const Value& start, const Value& stop, const Value& step) {
  auto bound = [](const Value& v, const char* what) {
    GS_CHECK(v.is_int() || v.is_bool(), "slice {} must be an integer or none, got {}", what, type_name(v));
    return v.as_int();
  };
  const bool has_step = !step.is_undefined() && !step.is_none();
  const int64_t st = has_step ? bound(step, "step") : 1;
  GS_CHECK(st != 0, "slice step cannot be zero");
  const auto len = static_cast<int64_t>(n);
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = bound(v, "index");
    if (i < 0) i += len;
    if (st > 0) return std::clamp<int64_t>(i, 0, len);
    return std::clamp<int64_t>(i, -1, len - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : len - 1);
  const int64_t e = clamp(stop, st > 0 ? len : -1);
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (auto m = find_method(obj, name)) return *m;
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.find(name)) return *v;
  }
  return missing_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if ((obj.is_dict() || obj.is_namespace()) && key.is_string()) {
    if (const Value* v = obj.find(key.as_string())) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.as_list().size()) : length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(fmt::format("'{}' has no element {}", object_name(obj), key.as_int()));
    if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
    const auto offs = code_point_offsets(obj.as_string());
    const auto k = static_cast<size_t>(i);
    return Value(obj.as_string().substr(offs[k], offs[k + 1] - offs[k]));
  }
  if (key.is_string()) {
    if (auto m = find_method(obj, key.as_string())) return *m;
    return missing_attr(obj, key.as_string());
  }
  return Value::undefined(
      fmt::format("'{}' has no element {}", object_name(obj), key.is_undefined() ? "Undefined" : type_name(key)));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_list()) {
    List out;
    for (const size_t i : slice_positions(obj.as_list().size(), start, stop, step)) out.push_back(obj.as_list()[i]);
    return Value(std::move(out));
  }
  GS_CHECK(obj.is_string(), "'{}' object is not subscriptable", type_name(obj));
  const std::string& s = obj.as_string();
  const auto offs = code_point_offsets(s);
  std::string out;
  for (const size_t i : slice_positions(offs.size() - 1, start, stop, step))
    out += s.substr(offs[i], offs[i + 1] - offs[i]);
  return Value(std::move(out));
}

}  // namespace gs::jinja
