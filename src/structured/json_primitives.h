// The JSON pieces every JSON constraint is built from: whitespace, strings (plain, with length
// bounds, with a pattern), numbers and integer ranges, literals and any JSON value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "structured/grammar.h"

namespace gs::structured {

// One side of a numeric range: a whole number, the bound itself included or not.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

class JsonPrimitives {
 public:
  JsonPrimitives(GrammarBuilder& b, bool any_whitespace);

  Sequence ws() const { return ws_; }
  // ws "," ws, ws ":" ws
  Sequence comma() const;
  Sequence colon() const;
  Symbol string();                                // any JSON string
  Symbol string_length(size_t min, long max);     // a string of min..max characters
  Symbol string_pattern(std::string_view regex);  // a string whose content matches
  // Integers in [lo, hi] (each bound optional); |bounds| <= 1e17.
  Symbol integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
  Symbol number(bool allow_negative);
  // Numbers (any fraction, no exponent) within whole-number bounds, each optional, either side
  // negative or not; |bounds| <= 1e17. Throws ConstraintError when no number lies within.
  Symbol number_in(std::optional<NumberBound> lo, std::optional<NumberBound> hi);
  Symbol any_value();  // any JSON value (one shared recursive rule)
  Symbol any_object();

  // The bytes a JSON string may hold unescaped (and the high bytes of UTF-8).
  static ByteSet plain_chars();

 private:
  std::vector<Sequence> nonneg(int64_t a, std::optional<int64_t> b);
  // Numbers m >= 0 within the bounds (both >= 0), as alternatives (none: the range is empty).
  std::vector<Sequence> magnitude_in(std::optional<NumberBound> lo, std::optional<NumberBound> hi);
  std::vector<Sequence> same_length(const std::string& lo, const std::string& hi);
  Symbol digits(size_t n);  // [0-9]{n}
  Symbol fraction_exponent();

  GrammarBuilder& b_;
  Sequence ws_;
  std::optional<Symbol> any_value_, any_object_;  // one shared recursive rule
};

}  // namespace gs::structured
