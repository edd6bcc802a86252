// Implements tokenizer/jinja/globals.h.
#include "tokenizer/jinja/globals.h"

#include <algorithm>
#include <ctime>

#include "tokenizer/jinja/args.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {
namespace {

Value raise_exception(const CallArgs& a) {
  ArgBinder b(a, "raise_exception", {"message"});
  throw TemplateRaise(to_str(b.required(0)));
}

Value make_namespace(const CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  GS_CHECK(a.args.size() <= 1, "namespace() takes at most one positional argument (a dict)");
  if (!a.args.empty()) {
    GS_CHECK(a.args[0].is_dict(), "namespace(): positional argument must be a dict, got {}", type_name(a.args[0]));
    ns->attrs = a.args[0].as_dict();
  }
  for (const auto& [k, v] : a.kwargs) {
    auto it = std::find_if(ns->attrs.begin(), ns->attrs.end(), [&](const auto& kv) { return kv.first == k; });
    if (it != ns->attrs.end())
      it->second = v;
    else
      ns->attrs.emplace_back(k, v);
  }
  return Value(std::move(ns));
}

Value range(const CallArgs& a) {
  GS_CHECK(a.kwargs.empty() && !a.args.empty() && a.args.size() <= 3, "range() takes 1 to 3 integer arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = int_arg(a.args[0], "range", "stop");
  } else {
    start = int_arg(a.args[0], "range", "start");
    stop = int_arg(a.args[1], "range", "stop");
    if (a.args.size() == 3) step = int_arg(a.args[2], "range", "step");
  }
  GS_CHECK(step != 0, "range() arg 3 must not be zero");
  const long double n = (static_cast<long double>(stop) - start) / step;
  GS_CHECK(n <= kMaxRange, "range too big: at most {} items are allowed", kMaxRange);
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
  return Value(std::move(out));
}

Value make_dict(const CallArgs& a) {
  GS_CHECK(a.args.empty(), "dict() accepts keyword arguments only");
  Dict d;
  for (const auto& [k, v] : a.kwargs) d.emplace_back(k, v);
  return Value(std::move(d));
}

Value strftime_now(const CallArgs& a) {
  ArgBinder b(a, "strftime_now", {"format"});
  const std::string& f = string_arg(b.required(0), "strftime_now", "format");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

Dict builtin_globals() {
  return {
      {"raise_exception", Value(Callable{"raise_exception", raise_exception})},
      {"namespace", Value(Callable{"namespace", make_namespace})},
      {"range", Value(Callable{"range", range})},
      {"dict", Value(Callable{"dict", make_dict})},
      {"strftime_now", Value(Callable{"strftime_now", strftime_now})},
  };
}

}  // namespace gs::jinja
