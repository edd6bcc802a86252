// WeightSlice: a tensor-parallel rank's rows or columns of an HF tensor.
#include "core/error.h"
#include "model/weight_source.h"

namespace gs {

Shape WeightSlice::shape_of(const Shape& shape) const {
  if (whole()) return shape;
  GS_CHECK(dim >= 0 && size_t(dim) < shape.size() && dim <= 1 && (dim == 0 || shape.size() == 2) && begin >= 0 &&
               begin + count <= shape[size_t(dim)],
           "weight slice [{}, {}) of dim {} does not fit shape {}", begin, begin + count, dim, shape_str(shape));
  Shape s = shape;
  s[size_t(dim)] = count;
  return s;
}

SliceIndex WeightSlice::index_map(const Shape& shape) const {
  if (whole()) return {};
  int64_t inner = 1;  // elements per index of `dim`
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  if (dim == 0) return {0, 0, begin * inner};
  return {count * inner, shape[1] * inner, begin * inner};
}

}  // namespace gs
