// Implements core/tensor.h (Tensor).
#include "core/tensor.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gs {

namespace {
int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
void check_shape(const Shape& s) {
  for (int64_t d : s) GS_CHECK(d >= 0, "negative dimension in shape {}", shape_str(s));
}
}  // namespace

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Allocator& alloc) {
  check_shape(shape);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = alloc.device();
  const size_t bytes = size_t(count(shape)) * dtype_size(dtype);
  void* p = alloc.allocate(bytes);
  t.data_ = p;
  t.holder_ = std::shared_ptr<void>(p, [&alloc, bytes](void* q) { alloc.deallocate(q, bytes); });
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device) {
  check_shape(shape);
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  GS_CHECK(i >= 0 && i < n, "dimension {} out of range for tensor {}", i, str());
  return shape_[size_t(i)];
}

int64_t Tensor::numel() const { return count(shape_); }

int64_t Tensor::row_elems() const {
  GS_CHECK(ndim() >= 1, "row_elems of a scalar tensor");
  int64_t n = 1;
  for (size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

Tensor Tensor::rows(int64_t begin, int64_t n) const {
  GS_CHECK(ndim() >= 1 && begin >= 0 && n >= 0 && begin + n <= shape_[0], "rows [{}, {}) out of range for tensor {}",
           begin, begin + n, str());
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + size_t(begin * row_elems()) * dtype_size(dtype_);
  t.shape_[0] = n;
  if (scales_) t.scales_ = std::make_shared<const Tensor>(scales_->rows(begin, n));
  return t;
}

const Tensor& Tensor::scales() const {
  static const Tensor none;
  return scales_ ? *scales_ : none;
}

Tensor Tensor::with_scales(const Tensor& scales) const {
  GS_CHECK(ndim() == 2 && scales.ndim() == 2 && scales.dim(0) == dim(0) &&
               (scales.dim(1) == 1 || scales.dim(1) == (dim(1) + 127) / 128),
           "scales {} do not fit the rows and column groups of {}", scales.str(), str());
  Tensor t = *this;
  t.scales_ = std::make_shared<const Tensor>(scales);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      GS_CHECK(infer < 0, "reshape {}: more than one -1", shape_str(shape));
      infer = int(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    GS_CHECK(known > 0 && numel() % known == 0, "cannot reshape {} to {}", str(), shape_str(shape));
    s[size_t(infer)] = numel() / known;
  }
  GS_CHECK(count(s) == numel(), "cannot reshape {} to {}", str(), shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::prefix(const Shape& shape) const {
  check_shape(shape);
  GS_CHECK(count(shape) <= numel(), "view {} does not fit in tensor {}", shape_str(shape), str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

std::string Tensor::str() const {
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_str(shape_), device_.str());
}

}  // namespace gs
