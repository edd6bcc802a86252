#include "structured/json_schema_grammar.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "structured/constraint_error.h"
#include "structured/json_primitives.h"
#include "structured/schema_overlap.h"

namespace gs::structured {

namespace {

using Json = nlohmann::ordered_json;

// Formats as regexes over the string's content.
const std::map<std::string, std::string>& format_patterns() {
  static const std::map<std::string, std::string> f = {
      {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"},
      {"time", R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
      {"date-time",
       R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
      {"email", R"([a-zA-Z0-9_+\-]+(\.[a-zA-Z0-9_+\-]+)*@[a-zA-Z0-9\-]+(\.[a-zA-Z0-9\-]+)*\.[a-zA-Z]{2,})"},
      {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
      {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
      {"uri", R"([a-zA-Z][a-zA-Z0-9+.\-]*:[^\s"\\]+)"},
      {"hostname", R"([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)*)"},
  };
  return f;
}

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, const JsonGrammarOptions& opts)
      : b_(b), root_(root), p_(b, opts.any_whitespace) {}

  Symbol value(const Json& s, int depth, const std::string& path) {
    if (depth > b_.limits().max_nesting)
      throw ConstraintError(
          fmt::format("the schema nests deeper than {} levels (at {})", b_.limits().max_nesting, path));
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw ConstraintError(fmt::format("schema 'false' at {} matches nothing", path));
      return p_.any_value();
    }
    if (!s.is_object()) throw ConstraintError(fmt::format("the schema at {} is not an object", path));
    check_keywords(s, path);
    if (s.contains("$ref")) return reference(s["$ref"], depth);
    if (s.contains("const")) return b_.choice({b_.literal(s["const"].dump())}, "const");
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        throw ConstraintError(fmt::format("'enum' at {} must be a non-empty array", path));
      std::vector<Sequence> alts;
      for (const auto& v : s["enum"]) alts.push_back(b_.literal(v.dump()));
      return b_.choice(std::move(alts), "enum");
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (!s[key].is_array() || s[key].empty())
          throw ConstraintError(fmt::format("'{}' at {} must be a non-empty array", key, path));
        std::vector<Json> branches;
        for (const auto& branch : s[key]) branches.push_back(merged(s, key, branch));
        if (std::string(key) == "oneOf")
          if (auto why = one_of_overlap(branches, [&](const Json& x) -> const Json& { return follow(x); });
              !why.empty())
            throw ConstraintError(fmt::format("unsupported 'oneOf' at {}: {}", path, why));
        std::vector<Sequence> alts;
        for (size_t i = 0; i < branches.size(); ++i)
          alts.push_back({value(branches[i], depth + 1, fmt::format("{}/{}/{}", path, key, i))});
        return b_.choice(std::move(alts), key);
      }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1)
        throw ConstraintError(fmt::format("unsupported keyword 'allOf' at {} (only a one-element allOf)", path));
      return value(merged(s, "allOf", s["allOf"][0]), depth + 1, path + "/allOf/0");
    }
    if (s.contains("type") && s["type"].is_array()) {
      std::vector<Sequence> alts;
      for (const auto& t : s["type"]) {
        Json one = s;
        one["type"] = t;
        alts.push_back({value(one, depth + 1, path)});
      }
      if (alts.empty()) throw ConstraintError(fmt::format("'type' at {} is an empty list", path));
      return b_.choice(std::move(alts), "types");
    }
    return typed(s, type_of(s, path), depth, path);
  }

 private:
  static Json merged(const Json& parent, const char* drop, const Json& child) {
    if (!child.is_object()) return child;
    Json out = child;
    for (auto it = parent.begin(); it != parent.end(); ++it)
      if (it.key() != drop && !out.contains(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        out[it.key()] = it.value();
    return out;
  }

  void check_keywords(const Json& s, const std::string& path) const {
    static const std::set<std::string> rejected = {"minProperties",
                                                   "maxProperties",
                                                   "patternProperties",
                                                   "propertyNames",
                                                   "dependentRequired",
                                                   "dependentSchemas",
                                                   "dependencies",
                                                   "if",
                                                   "then",
                                                   "else",
                                                   "not",
                                                   "contains",
                                                   "minContains",
                                                   "maxContains",
                                                   "multipleOf",
                                                   "unevaluatedProperties",
                                                   "unevaluatedItems",
                                                   "additionalItems",
                                                   "$dynamicRef"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (k == "unevaluatedProperties" && it.value() == false) continue;
      if (rejected.count(k)) throw ConstraintError(fmt::format("unsupported JSON Schema keyword '{}' at {}", k, path));
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] == true)
      throw ConstraintError(fmt::format("unsupported JSON Schema keyword 'uniqueItems' at {}", path));
  }

  std::string type_of(const Json& s, const std::string& path) const {
    if (s.contains("type")) {
      if (!s["type"].is_string()) throw ConstraintError(fmt::format("'type' at {} must be a string or a list", path));
      return s["type"].get<std::string>();
    }
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return "object";
    if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
      return "array";
    if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
      return "string";
    if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
        s.contains("exclusiveMaximum"))
      return "number";
    return "any";
  }

  Symbol typed(const Json& s, const std::string& type, int depth, const std::string& path) {
    if (type == "any") return p_.any_value();
    if (type == "null") return b_.choice({b_.literal("null")}, "null");
    if (type == "boolean") return b_.choice({b_.literal("true"), b_.literal("false")}, "boolean");
    if (type == "string") return string(s, path);
    if (type == "integer") return integer(s, path);
    if (type == "number") return number(s, path);
    if (type == "object") return object(s, depth, path);
    if (type == "array") return array(s, depth, path);
    throw ConstraintError(fmt::format("unknown type '{}' at {}", type, path));
  }

  // The schema a local '$ref' names; throws ConstraintError.
  const Json& resolve(const std::string& r) const {
    if (r.empty() || r[0] != '#')
      throw ConstraintError(fmt::format("unsupported '$ref' '{}' (only local '#/...' references)", r));
    const Json* target = &root_;
    size_t i = 1;
    while (i < r.size()) {
      if (r[i] != '/') throw ConstraintError(fmt::format("bad '$ref' '{}'", r));
      size_t j = r.find('/', i + 1);
      std::string part = r.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
      for (size_t k; (k = part.find("~1")) != std::string::npos;) part.replace(k, 2, "/");
      for (size_t k; (k = part.find("~0")) != std::string::npos;) part.replace(k, 2, "~");
      if (!target->is_object() || !target->contains(part))
        throw ConstraintError(fmt::format("'$ref' '{}' does not resolve", r));
      target = &(*target)[part];
      i = j == std::string::npos ? r.size() : j;
    }
    return *target;
  }

  // `s`, or the schema its chain of '$ref's ends at.
  const Json& follow(const Json& s) const {
    const Json* t = &s;
    for (int hops = 0; t->is_object() && t->contains("$ref") && (*t)["$ref"].is_string(); ++hops) {
      if (hops > b_.limits().max_nesting) throw ConstraintError("'$ref' chain too long (or circular)");
      t = &resolve((*t)["$ref"].get<std::string>());
    }
    return *t;
  }

  Symbol reference(const Json& ref, int depth) {
    if (!ref.is_string()) throw ConstraintError("'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return GrammarBuilder::ref(it->second);
    const Json& target = resolve(r);
    uint32_t rule = b_.new_rule("ref");
    refs_[r] = rule;  // before compiling the target, so recursion refers back to it
    b_.add_alternative(rule, {value(target, depth + 1, r)});
    return GrammarBuilder::ref(rule);
  }

  Symbol string(const Json& s, const std::string& path) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) throw ConstraintError(fmt::format("'pattern' at {} must be a string", path));
      return p_.string_pattern(s["pattern"].get<std::string>());
    }
    if (s.contains("format")) {
      std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      auto it = format_patterns().find(f);
      if (it == format_patterns().end())
        throw ConstraintError(fmt::format("unsupported string format '{}' at {} (keyword 'format')", f, path));
      return p_.string_pattern(it->second);
    }
    size_t min = s.value("minLength", size_t{0});
    long max = s.contains("maxLength") ? s["maxLength"].get<long>() : -1;
    return p_.string_length(min, max);
  }

  // One side of a numeric range as the schema states it (draft 4 boolean or draft 6 numeric
  // exclusive bounds), with the keyword that set it.
  struct Bound {
    double value = 0;
    bool exclusive = false;
    const char* keyword = "";
  };

  // Both keywords given (draft 6): the tighter one.
  static std::optional<Bound> bound(const Json& s, const char* inclusive, const char* exclusive, bool lower) {
    std::optional<Bound> b;
    if (s.contains(inclusive)) b = Bound{s[inclusive].get<double>(), false, inclusive};
    if (s.contains(exclusive)) {
      if (s[exclusive].is_boolean()) {
        if (b && s[exclusive].get<bool>()) b->exclusive = true, b->keyword = exclusive;
      } else {
        const double v = s[exclusive].get<double>();
        if (!b || (lower ? v >= b->value : v <= b->value)) b = Bound{v, true, exclusive};
      }
    }
    return b;
  }

  // A bound as an int64 within 1e17, or a ConstraintError naming its keyword.
  static int64_t whole(double v, const char* keyword, const std::string& path) {
    if (!(std::fabs(v) <= 1e17))
      throw ConstraintError(
          fmt::format("unsupported numeric bound at {} (keyword '{}'): beyond 1e17 in magnitude", path, keyword));
    return static_cast<int64_t>(v);
  }

  Symbol integer(const Json& s, const std::string& path) {
    auto lo = bound(s, "minimum", "exclusiveMinimum", true);
    auto hi = bound(s, "maximum", "exclusiveMaximum", false);
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = whole(lo->exclusive ? std::floor(lo->value) + 1 : std::ceil(lo->value), lo->keyword, path);
    if (hi) ihi = whole(hi->exclusive ? std::ceil(hi->value) - 1 : std::floor(hi->value), hi->keyword, path);
    if (ilo && ihi && *ilo > *ihi) throw ConstraintError(fmt::format("no integer lies within the bounds at {}", path));
    return p_.integer(ilo, ihi);
  }

  // Whole-number bounds are exact (the integer part bounded, the fraction free, the boundary
  // values decided by their fraction); others are refused by keyword. Bounded numbers are
  // written without an exponent, except the plain `minimum: 0`.
  Symbol number(const Json& s, const std::string& path) {
    auto lo = bound(s, "minimum", "exclusiveMinimum", true);
    auto hi = bound(s, "maximum", "exclusiveMaximum", false);
    if (!lo && !hi) return p_.number(true);
    if (lo && !hi && lo->value == 0 && !lo->exclusive) return p_.number(false);
    auto exact = [&](const Bound& b) -> NumberBound {
      if (std::floor(b.value) != b.value)
        throw ConstraintError(
            fmt::format("unsupported numeric bound at {} (keyword '{}'): a number's bounds must be whole numbers "
                        "(use type integer, or scale the value)",
                        path, b.keyword));
      return {whole(b.value, b.keyword, path), b.exclusive};
    };
    std::optional<NumberBound> nlo, nhi;
    if (lo) nlo = exact(*lo);
    if (hi) nhi = exact(*hi);
    try {
      return p_.number_in(nlo, nhi);
    } catch (const ConstraintError&) {
      throw ConstraintError(fmt::format("no number lies within the bounds at {} (keywords '{}' and '{}')", path,
                                        lo ? lo->keyword : "minimum", hi ? hi->keyword : "maximum"));
    }
  }

  Symbol object(const Json& s, int depth, const std::string& path) {
    struct Prop {
      std::string key;
      const Json* schema;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    static const Json kAny = true;
    if (s.contains("required")) {
      if (!s["required"].is_array()) throw ConstraintError(fmt::format("'required' at {} must be an array", path));
      for (const auto& r : s["required"]) required.insert(r.get<std::string>());
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object())
        throw ConstraintError(fmt::format("'properties' at {} must be an object", path));
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it)
        props.push_back({it.key(), &it.value(), required.count(it.key()) > 0});
    }
    for (const auto& r : required)
      if (!s.contains("properties") || !s["properties"].contains(r)) props.push_back({r, &kAny, true});
    const Json* extra = nullptr;
    if (s.contains("additionalProperties") && s["additionalProperties"] != false) extra = &s["additionalProperties"];
    if (!s.contains("properties") && !s.contains("additionalProperties") && required.empty()) extra = &kAny;

    std::vector<Sequence> members;
    for (const auto& p : props) {
      Sequence m = b_.literal(Json(p.key).dump());
      for (auto sym : p_.colon()) m.push_back(sym);
      m.push_back(value(*p.schema, depth + 1, path + "/properties/" + p.key));
      members.push_back(std::move(m));
    }
    Sequence extra_member;
    if (extra) {
      extra_member = {p_.string()};
      for (auto sym : p_.colon()) extra_member.push_back(sym);
      extra_member.push_back(value(*extra, depth + 1, path + "/additionalProperties"));
    }
    // rest[i][first]: members i.. given whether none has been written yet.
    std::vector<std::array<Symbol, 2>> rest(props.size() + 1);
    for (int first = 0; first < 2; ++first) {
      if (!extra) {
        rest[props.size()][first] = b_.choice({{}}, "end");
      } else {
        Sequence more = p_.comma();
        more.insert(more.end(), extra_member.begin(), extra_member.end());
        Symbol tail = b_.star(more);
        if (first) {
          Sequence one = extra_member;
          one.push_back(tail);
          rest[props.size()][first] = b_.optional(one);
        } else {
          rest[props.size()][first] = tail;
        }
      }
    }
    for (size_t i = props.size(); i-- > 0;) {
      for (int first = 0; first < 2; ++first) {
        Sequence take = first ? Sequence{} : p_.comma();
        take.insert(take.end(), members[i].begin(), members[i].end());
        take.push_back(rest[i + 1][0]);
        std::vector<Sequence> alts{take};
        if (!props[i].required) alts.push_back({rest[i + 1][first]});
        rest[i][first] = b_.choice(std::move(alts), "members");
      }
    }
    Sequence seq{b_.byte('{')};
    for (auto sym : p_.ws()) seq.push_back(sym);
    seq.push_back(rest[0][1]);
    for (auto sym : p_.ws()) seq.push_back(sym);
    seq.push_back(b_.byte('}'));
    return b_.choice({seq}, "object");
  }

  // A bounded array of scalar items gets one copy of the item per slot, so each item's rules
  // return to one place and the mask cache stays context-independent at the item's end.
  static constexpr long kMaxItemCopies = 16;

  static bool scalar(const Json& s) {
    if (!s.is_object() || s.contains("$ref") || s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf"))
      return false;
    if (s.contains("const") || s.contains("enum")) return true;
    if (!s.contains("type") || !s["type"].is_string()) return false;
    const std::string t = s["type"].get<std::string>();
    return t == "string" || t == "integer" || t == "number" || t == "boolean" || t == "null";
  }

  // items_1 ("," items_2 ( ... )?)?: emax slots, the first emin required.
  Symbol item_slots(const Json& items, size_t emin, size_t emax, int depth, const std::string& path) {
    std::optional<Symbol> tail;  // what may follow slot k
    for (size_t k = emax - 1; k >= 1; --k) {
      Sequence next = p_.comma();
      next.push_back(value(items, depth + 1, path + "/items"));
      if (tail) next.push_back(*tail);
      std::vector<Sequence> alts{next};
      if (k >= emin) alts.push_back({});
      tail = b_.choice(std::move(alts), "items_more");
    }
    Sequence first{value(items, depth + 1, path + "/items")};
    if (tail) first.push_back(*tail);
    return emin ? b_.choice({first}, "items") : b_.optional(first);
  }

  Symbol array(const Json& s, int depth, const std::string& path) {
    size_t min = s.value("minItems", size_t{0});
    long max = s.contains("maxItems") ? s["maxItems"].get<long>() : -1;
    std::vector<Symbol> prefix;
    if (s.contains("prefixItems")) {
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(value(s["prefixItems"][i], depth + 1, fmt::format("{}/prefixItems/{}", path, i)));
    }
    bool extra_allowed = !(s.contains("items") && s["items"] == false) && !(prefix.size() && !s.contains("items"));
    const bool slots = extra_allowed && prefix.empty() && max > 0 && max <= kMaxItemCopies &&
                       static_cast<long>(min) <= max && s.contains("items") && scalar(s["items"]);
    Symbol item = extra_allowed && !slots && max != static_cast<long>(prefix.size())
                      ? (s.contains("items") ? value(s["items"], depth + 1, path + "/items") : p_.any_value())
                      : Symbol{};
    if (max >= 0 && static_cast<size_t>(max) < prefix.size())
      throw ConstraintError(fmt::format("'maxItems' at {} is below the prefixItems", path));
    Sequence seq{b_.byte('[')};
    for (auto sym : p_.ws()) seq.push_back(sym);
    Sequence body;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (i)
        for (auto sym : p_.comma()) body.push_back(sym);
      body.push_back(prefix[i]);
    }
    if (extra_allowed) {
      size_t emin = min > prefix.size() ? min - prefix.size() : 0;
      long emax = max < 0 ? -1 : max - static_cast<long>(prefix.size());
      Sequence sep_item = p_.comma();
      sep_item.push_back(item);
      const bool scalar_items = s.contains("items") && scalar(s["items"]);
      if (prefix.empty() && emax < 0 && (emin <= 1 || (scalar_items && emin <= kMaxItemCopies))) {
        // list -> item more, more -> "," list | empty: the item appears once, so its end
        // returns to one place (the mask cache stays context-independent at the item's end);
        // scalar items before it, for minItems, are copies of their own.
        for (size_t k = 1; k < emin; ++k) {
          body.push_back(value(s["items"], depth + 1, path + "/items"));
          for (auto sym : p_.comma()) body.push_back(sym);
        }
        if (emin > 1) emin = 1;
        uint32_t list = b_.new_rule("items");
        uint32_t more = b_.new_rule("items_more");
        b_.add_alternative(list, {item, GrammarBuilder::ref(more)});
        Sequence next = p_.comma();
        next.push_back(GrammarBuilder::ref(list));
        b_.add_alternative(more, std::move(next));
        b_.add_alternative(more, {});
        body.push_back(emin ? GrammarBuilder::ref(list) : b_.optional({GrammarBuilder::ref(list)}));
      } else if (slots) {
        body.push_back(item_slots(s["items"], emin, static_cast<size_t>(emax), depth, path));
      } else if (prefix.empty()) {
        if (emax != 0) {
          Sequence first{item};
          first.push_back(b_.repeat(sep_item, emin ? emin - 1 : 0, emax < 0 ? -1 : emax - 1, "items"));
          body.push_back(emin ? b_.choice({first}, "items") : b_.optional(first));
        }
      } else {
        body.push_back(b_.repeat(sep_item, emin, emax, "items"));
      }
    } else if (min > prefix.size()) {
      throw ConstraintError(fmt::format("'minItems' at {} needs more items than the schema allows", path));
    }
    seq.insert(seq.end(), body.begin(), body.end());
    for (auto sym : p_.ws()) seq.push_back(sym);
    seq.push_back(b_.byte(']'));
    return b_.choice({seq}, "array");
  }

  GrammarBuilder& b_;
  const Json& root_;
  JsonPrimitives p_;
  std::map<std::string, uint32_t> refs_;
};

}  // namespace

Grammar json_schema_grammar(std::string_view schema_text, const JsonGrammarOptions& opts, const GrammarLimits& limits) {
  if (schema_text.size() > limits.max_source_bytes)
    throw ConstraintError(fmt::format("the schema is larger than {} bytes", limits.max_source_bytes));
  Json schema;
  try {
    schema = Json::parse(schema_text);
  } catch (const std::exception& e) {
    throw ConstraintError(fmt::format("the schema is not valid JSON: {}", e.what()));
  }
  GrammarBuilder b(limits);
  uint32_t root = b.new_rule("root");
  SchemaCompiler c(b, schema, opts);
  try {
    b.add_alternative(root, {c.value(schema, 0, "#")});
  } catch (const nlohmann::json::exception& e) {
    throw ConstraintError(fmt::format("the schema has a keyword of the wrong type: {}", e.what()));
  }
  b.set_root(root);
  return std::move(b).finish();
}

Grammar json_object_grammar(const JsonGrammarOptions& opts, const GrammarLimits& limits) {
  GrammarBuilder b(limits);
  uint32_t root = b.new_rule("root");
  JsonPrimitives p(b, opts.any_whitespace);
  b.add_alternative(root, {p.any_object()});
  b.set_root(root);
  return std::move(b).finish();
}

}  // namespace gs::structured
