// Dummy weights: a counter-based generator (splitmix64 of seed, name and index), so any element
// is computable independently: chunks are generated in parallel and in the compute dtype.
#include <cmath>
#include <functional>

#include "model/weight_source.h"

namespace gs {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: stable across platforms, unlike std::hash
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class DummySource final : public WeightSource {
 public:
  DummySource(uint64_t seed, Backend& backend) : seed_(seed), backend_(backend) {}

  void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit init, int64_t fan_in,
            const WeightSlice& slice) override {
    const int64_t n = dst.numel();
    const Tensor flat = dst.reshape({n});
    const uint64_t key = splitmix64(seed_ ^ hash_name(name));
    const float a = std::sqrt(3.0f / float(fan_in > 0 ? fan_in : 1));
    const DType dt = dst.dtype();
    host_.resize(size_t(std::min(n, kChunk)) * dtype_size(dt));
    for (int64_t off = 0; off < n; off += kChunk) {
      const int64_t m = std::min(kChunk, n - off);
      fill(host_.data(), dt, m,
           [&](int64_t i) { return value(init, key, uint64_t(slice.full_index(shape, off + i)), a); });
      backend_.copy(flat.rows(off, m), Tensor::wrap(host_.data(), {m}, dt, Device::cpu()));
      backend_.stream().synchronize();  // host_ is reused by the next chunk
    }
  }

  std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                               const WeightSlice& slice) override {
    int64_t n = 1;
    for (int64_t e : slice.shape_of(shape)) n *= e;
    std::vector<float> v(static_cast<size_t>(n));
    const uint64_t key = splitmix64(seed_ ^ hash_name(name));
    const float a = std::sqrt(3.0f / float(fan_in > 0 ? fan_in : 1));
    fill(reinterpret_cast<uint8_t*>(v.data()), DType::F32, n,
         [&](int64_t i) { return value(init, key, uint64_t(slice.full_index(shape, i)), a); });
    return v;
  }

  std::optional<float> scalar(const std::string&) override { return std::nullopt; }  // scales default to 1

 private:
  static constexpr int64_t kChunk = 1 << 22;

  // Writes gen(0..m) into `out` as `dt`, in parallel: the 8B shape has 8e9 of them.
  template <typename Gen>
  static void fill(uint8_t* out, DType dt, int64_t m, Gen gen) {
    if (dt == DType::F32) {
      auto* o = reinterpret_cast<float*>(out);
#pragma omp parallel for if (m > 65536)
      for (int64_t i = 0; i < m; ++i) o[i] = gen(i);
      return;
    }
    auto* o = reinterpret_cast<uint16_t*>(out);
    if (dt == DType::BF16) {
#pragma omp parallel for if (m > 65536)
      for (int64_t i = 0; i < m; ++i) o[i] = f32_to_bf16(gen(i));
      return;
    }
#pragma omp parallel for if (m > 65536)
    for (int64_t i = 0; i < m; ++i) o[i] = f32_to_f16(gen(i));
  }

  static float value(WeightInit init, uint64_t key, uint64_t i, float a) {
    switch (init) {
      case WeightInit::Ones: return 1.0f;
      case WeightInit::Zeros: return 0.0f;
      case WeightInit::Uniform: break;
    }
    const uint64_t r = splitmix64(key + i);
    const float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    return (2.0f * u - 1.0f) * a;
  }

  uint64_t seed_;
  Backend& backend_;
  std::vector<uint8_t> host_;
};

}  // namespace

std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, Backend& backend) {
  return std::make_unique<DummySource>(seed, backend);
}

}  // namespace gs
