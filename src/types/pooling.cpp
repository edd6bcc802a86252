// Implements types/pooling.h.
#include "types/pooling.h"

#include <cmath>

#include "core/error.h"

namespace gs {

Pooling parse_pooling(const std::string& name) {
  if (name == "last" || name == "LAST") return Pooling::Last;
  if (name == "mean" || name == "MEAN") return Pooling::Mean;
  fail("pooling '{}' is not supported: last or mean", name);
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Last: return "last";
    case Pooling::Mean: return "mean";
    default: return "none";
  }
}

std::vector<float> finish_pooling(std::vector<double> sum, int rows, bool normalize) {
  GS_CHECK(rows > 0, "pooling over no rows");
  double norm = 0.0;
  for (double& v : sum) {
    v /= rows;
    norm += v * v;
  }
  norm = normalize && norm > 0.0 ? std::sqrt(norm) : 1.0;
  std::vector<float> out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out[i] = static_cast<float>(sum[i] / norm);
  return out;
}

}  // namespace gs
