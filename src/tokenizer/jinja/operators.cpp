// Implements tokenizer/jinja/operators.h.
#include "tokenizer/jinja/operators.h"

#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja/utf8.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {
namespace {

constexpr size_t kMaxRepeat = size_t{1} << 26;  // `'x' * n` beyond 64 Mi elements is refused

[[noreturn]] void type_error(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

bool is_num(const Value& v) { return v.is_int() || v.is_float() || v.is_bool(); }
bool both_int(const Value& a, const Value& b) { return !a.is_float() && !b.is_float(); }

// Integer +, -, * with Python's "no silent wraparound" (we have no bigints: overflow is an error).
template <typename Op>
Value checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  GS_CHECK(!op(x, y, &r), "integer overflow in template arithmetic");
  return Value(r);
}
bool add_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_ovf(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

Value repeat(const Value& seq, int64_t n) {
  const size_t count = n > 0 ? static_cast<size_t>(n) : 0;
  if (seq.is_string()) {
    GS_CHECK(count * seq.as_string().size() <= kMaxRepeat, "string repetition result is too large");
    std::string out;
    for (size_t i = 0; i < count; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  GS_CHECK(count * seq.as_list().size() <= kMaxRepeat, "list repetition result is too large");
  List out;
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (is_num(a) && is_num(b)) {
    if (both_int(a, b)) return checked(add_ovf, a.as_int(), b.as_int());
    return Value(a.as_double() + b.as_double());
  }
  if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(out));
  }
  if (a.is_string()) fail("can only concatenate str (not \"{}\") to str", type_name(b));
  type_error("+", a, b);
}

Value arith(std::string_view op, const Value& a, const Value& b) {
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) fail("printf-style string formatting ('%') is not supported; use ~ or format()");
  if (!is_num(a) || !is_num(b)) type_error(op, a, b);
  const bool ints = both_int(a, b);
  if (op == "-") {
    if (ints) return checked(sub_ovf, a.as_int(), b.as_int());
    return Value(a.as_double() - b.as_double());
  }
  if (op == "*") {
    if (ints) return checked(mul_ovf, a.as_int(), b.as_int());
    return Value(a.as_double() * b.as_double());
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;  // square-and-multiply
      while (e > 0) {
        if (e & 1) acc = checked(mul_ovf, acc, base).as_int();
        e >>= 1;
        if (e > 0) base = checked(mul_ovf, base, base).as_int();
      }
      return Value(acc);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  GS_CHECK(b.as_double() != 0.0, "division by zero");
  if (op == "/") return Value(a.as_double() / b.as_double());
  if (ints) {
    const int64_t x = a.as_int(), y = b.as_int();
    GS_CHECK(!(x == INT64_MIN && y == -1), "integer overflow in template arithmetic");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }
  const double x = a.as_double(), y = b.as_double();
  if (op == "//") return Value(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value(m);
}

}  // namespace

void undefined_error(const Value& v) {
  fail("{}", v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint());
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (is_num(a) && is_num(b)) {
    if (both_int(a, b)) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  fail("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b));
}

bool contains(const Value& c, const Value& item) {
  if (c.is_string()) {
    GS_CHECK(item.is_string(), "'in <string>' requires string as left operand, not {}", type_name(item));
    return c.as_string().find(item.as_string()) != std::string::npos;
  }
  if (c.is_list()) {
    for (const auto& e : c.as_list())
      if (e.equals(item)) return true;
    return false;
  }
  if (c.is_dict()) return item.is_string() && c.find(item.as_string()) != nullptr;
  if (c.is_undefined()) return false;
  fail("argument of type '{}' is not iterable", type_name(c));
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value(to_str(a) + to_str(b));
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  if (op == "<") return Value(compare(a, b, op) < 0);
  if (op == "<=") return Value(compare(a, b, op) <= 0);
  if (op == ">") return Value(compare(a, b, op) > 0);
  if (op == ">=") return Value(compare(a, b, op) >= 0);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "+") return add(a, b);
  return arith(op, a, b);
}

Value unary_op(std::string_view op, const Value& v) {
  if (op == "not") return Value(!v.truthy());
  if (v.is_undefined()) undefined_error(v);
  GS_CHECK(is_num(v), "bad operand type for unary {}: '{}'", op, type_name(v));
  if (op == "+") return v.is_bool() ? Value(v.as_int()) : v;
  if (v.is_float()) return Value(-v.as_double());
  GS_CHECK(v.as_int() != INT64_MIN, "integer overflow in template arithmetic");
  return Value(-v.as_int());
}

List iterate(const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    List keys;
    for (const auto& [k, e] : v.as_dict()) keys.emplace_back(k);
    return keys;
  }
  if (v.is_string()) {
    List chars;
    const auto offs = code_point_offsets(v.as_string());
    for (size_t i = 0; i + 1 < offs.size(); ++i)
      chars.emplace_back(v.as_string().substr(offs[i], offs[i + 1] - offs[i]));
    return chars;
  }
  if (v.is_undefined()) return {};
  fail("'{}' object is not iterable", type_name(v));
}

int64_t length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_point_count(v.as_string()));
  if (v.is_list()) return static_cast<int64_t>(v.as_list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().size());
  if (v.is_namespace()) return static_cast<int64_t>(v.as_namespace().attrs.size());
  if (v.is_undefined()) return 0;
  fail("object of type '{}' has no len()", type_name(v));
}

}  // namespace gs::jinja
