#include "ops/dummy_fill.h"

#include "core/error.h"
#include "ops/backend.h"

namespace gs {

namespace {

template <typename O, typename Convert>
void fill_as(O* out, int64_t n, const DummyFill& f, Convert convert) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = convert(f(i));
}

}  // namespace

void fill_dummy_host(void* out, DType dt, int64_t n, const DummyFill& f) {
  GS_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
           "dummy weights in {}: only f32, bf16 and f16 are generated", dtype_name(dt));
  if (dt == DType::F32) return fill_as(static_cast<float*>(out), n, f, [](float v) { return v; });
  auto* o = static_cast<uint16_t*>(out);
  if (dt == DType::BF16) return fill_as(o, n, f, f32_to_bf16);
  fill_as(o, n, f, f32_to_f16);
}

void Backend::fill_dummy(const Tensor& dst, const DummyFill& f) {
  GS_CHECK(dst.device().is_cpu(), "fill_dummy: {} is not host memory, and the {} backend computes only that", dst.str(),
           name());
  fill_dummy_host(dst.data(), dst.dtype(), dst.numel(), f);
}

}  // namespace gs
