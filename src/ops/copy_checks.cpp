// check_leading_columns (ops/backend.h): the shape rule of Backend::copy_leading_columns.
#include "core/error.h"
#include "ops/backend.h"

namespace gs {

void check_leading_columns(const Tensor& dst, const Tensor& src) {
  GS_CHECK(dst.ndim() == 2 && src.ndim() == 2 && dst.dtype() == src.dtype() && dst.dim(0) == src.dim(0) &&
               src.dim(1) <= dst.dim(1),
           "copy_leading_columns: {} does not fit the leading columns of {}", src.str(), dst.str());
}

}  // namespace gs
