// Tensor: a contiguous, row-major, typed view of device memory, optionally owning it.
//
// Views share ownership of the allocation they came from, so a view keeps its memory alive.
// Tensors are values: copying one copies the view, never the data.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"

namespace gs {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2, 3]"

class Tensor {
 public:
  Tensor() = default;

  // Allocates numel(shape) elements from `alloc`; freed when the last view is gone.
  static Tensor empty(const Shape& shape, DType dtype, Allocator& alloc);
  // Wraps memory owned elsewhere (must outlive the tensor and its views).
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device);

  bool defined() const { return data_ != nullptr; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  int64_t row_elems() const;  // elements per index of dim 0

  // Rows [begin, begin + count) along dim 0.
  Tensor rows(int64_t begin, int64_t count) const;
  // The same memory with another shape of equal numel (one dim may be -1).
  Tensor reshape(const Shape& shape) const;
  // The first numel(shape) elements with that shape (for carving views out of an arena).
  Tensor prefix(const Shape& shape) const;

  std::string str() const;  // "bf16[4, 64] on cuda:0"

  // A quantized weight's scales, or an undefined tensor: FP8 [N, K] has f32 [N, G], G = 1 (one
  // scale per row) or ceil(K / 128) (row n's columns [128 g, 128 g + 128) scaled by scales[n, g]).
  // rows() views slice them along.
  const Tensor& scales() const;
  Tensor with_scales(const Tensor& scales) const;

 private:
  std::shared_ptr<void> holder_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_;
  std::shared_ptr<const Tensor> scales_;
};

}  // namespace gs
