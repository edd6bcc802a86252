#include "ops/dummy_fill.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/backend.h"

namespace gs {

namespace {

template <typename O, typename Convert>
void fill_as(O* out, int64_t first, int64_t n, const DummyFill& f, Convert convert) {
#pragma omp parallel for if (n > 65536)
  for (int64_t j = 0; j < n; ++j) out[j] = convert(f(first + j));
}

}  // namespace

void fill_dummy_host(void* out, DType dt, int64_t first, int64_t n, const DummyFill& f) {
  GS_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
           "dummy weights in {}: only f32, bf16 and f16 are generated", dtype_name(dt));
  if (dt == DType::F32) return fill_as(static_cast<float*>(out), first, n, f, [](float v) { return v; });
  auto* o = static_cast<uint16_t*>(out);
  if (dt == DType::BF16) return fill_as(o, first, n, f, f32_to_bf16);
  fill_as(o, first, n, f, f32_to_f16);
}

// Host memory is written in place; device memory a host chunk at a time.
void Backend::fill_dummy(const Tensor& dst, const DummyFill& f) {
  constexpr int64_t kChunk = int64_t(1) << 22;
  const int64_t n = dst.numel();
  const Tensor flat = dst.reshape({n});
  if (dst.device().is_cpu()) return fill_dummy_host(flat.data(), dst.dtype(), 0, n, f);
  std::vector<uint8_t> host(size_t(std::min(n, kChunk)) * dtype_size(dst.dtype()));
  for (int64_t off = 0; off < n; off += kChunk) {
    const int64_t m = std::min(kChunk, n - off);
    fill_dummy_host(host.data(), dst.dtype(), off, m, f);
    copy(flat.rows(off, m), Tensor::wrap(host.data(), {m}, dst.dtype(), Device::cpu()));
    stream().synchronize();  // `host` is reused by the next chunk
  }
}

}  // namespace gs
