// Dummy weights (--load-format dummy, model/dummy_source.cpp): every element's value is a
// function of the seed, the tensor's name and the element's index in the whole HF tensor, so a
// backend writes any slice of a weight in place on its own device, in parallel, and a
// tensor-parallel rank's slice equals the same slice of the whole tensor.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/host_device.h"
#include "core/splitmix64.h"

namespace gs {

// How a dummy weight is initialised; a checkpoint ignores it.
enum class WeightInit { Ones, Zeros, Uniform };

// Element i of a slice -> its flat index in the whole row-major tensor: the slice keeps `run`
// elements `inner` apart of every `stride`, from `offset` on (a column slice: inner 1; a
// transposed gather: inner the source's row length); run 0: one contiguous range from `offset`
// (the whole tensor, or a slice of rows).
struct SliceIndex {
  int64_t run = 0, stride = 0, offset = 0, inner = 1;
  GS_HD int64_t operator()(int64_t i) const { return run ? i / run * stride + offset + i % run * inner : offset + i; }
};

// Element i of a dummy weight's slice: Uniform(-a, a) from 24 random bits of splitmix64(key +
// its whole-tensor index), or the constant of Ones / Zeros.
struct DummyFill {
  uint64_t key = 0;  // splitmix64(seed ^ a hash of the tensor's name)
  float a = 0.0f;
  WeightInit init = WeightInit::Uniform;
  SliceIndex at;

  GS_HD float operator()(int64_t i) const {
    if (init == WeightInit::Ones) return 1.0f;
    if (init == WeightInit::Zeros) return 0.0f;
    const uint64_t r = splitmix64(key + uint64_t(at(i)));
    const float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits: exact
    return (2.0f * u - 1.0f) * a;
  }
};

// out[i] = f(i) for i in [0, n), as dt (F32, BF16 or F16), on the host's cores.
void fill_dummy_host(void* out, DType dt, int64_t n, const DummyFill& f);

}  // namespace gs
