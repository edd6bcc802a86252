// ConstraintError: a constraint that cannot be compiled (bad syntax, unsupported keyword, a cap
// exceeded). Its message names the problem (and the keyword) so the API can answer 400.
#pragma once
#include <stdexcept>
#include <string>

namespace gs::structured {

class ConstraintError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gs::structured
