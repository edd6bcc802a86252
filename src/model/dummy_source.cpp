// Dummy weights: a counter-based generator (ops/dummy_fill.h: splitmix64 of seed, name and
// index), so any element is computable independently: the backend writes each tensor in place,
// on the GPU a kernel a tensor.
#include <cmath>

#include "model/weight_source.h"

namespace gs {

namespace {

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
    backend_.fill_dummy(dst, values(name, shape, init, fan_in, slice));
  }

  std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                               const WeightSlice& slice) override {
    int64_t n = 1;
    for (int64_t e : slice.shape_of(shape)) n *= e;
    std::vector<float> v(static_cast<size_t>(n));
    fill_dummy_host(v.data(), DType::F32, n, values(name, shape, init, fan_in, slice));
    return v;
  }

  bool fill_gathered(const std::string& name, const Shape&, WeightInit init, int64_t fan_in, const SliceIndex& at,
                     const Tensor& dst) override {
    backend_.fill_dummy(dst, values(name, init, fan_in, at));
    return true;
  }

  std::optional<float> scalar(const std::string&) override { return std::nullopt; }  // scales default to 1

 private:
  DummyFill values(const std::string& name, WeightInit init, int64_t fan_in, const SliceIndex& at) const {
    return {splitmix64(seed_ ^ hash_name(name)), std::sqrt(3.0f / float(fan_in > 0 ? fan_in : 1)), init, at};
  }
  DummyFill values(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                   const WeightSlice& slice) const {
    return values(name, init, fan_in, slice.index_map(shape));
  }

  uint64_t seed_;
  Backend& backend_;
};

}  // namespace

std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, Backend& backend) {
  return std::make_unique<DummySource>(seed, backend);
}

}  // namespace gs
