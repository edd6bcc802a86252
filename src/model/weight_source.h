// WeightSource: where the named Hugging Face tensors of a model come from (a checkpoint, or
// deterministic random numbers), written straight into slices of the backend's weight tensors.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "ops/backend.h"

namespace gs {

// The part of an HF tensor one tensor-parallel rank loads: `count` indices of dimension `dim`
// (0: rows, 1: columns of a matrix) from `begin`. The default is the whole tensor.
struct WeightSlice {
  int dim = 0;
  int64_t begin = 0;
  int64_t count = -1;  // -1: all of the dimension

  bool whole() const { return count < 0; }
  // The slice's shape within the full `shape`; throws gs::Error when it does not fit.
  Shape shape_of(const Shape& shape) const;
  // The flat index in the full tensor of the slice's i-th element (row-major).
  int64_t full_index(const Shape& shape, int64_t i) const { return index_map(shape)(i); }
  SliceIndex index_map(const Shape& shape) const;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Writes `slice` of tensor `name` (HF shape `shape`) into `dst` (a device view of exactly
  // that many elements, in the backend's compute dtype). `fan_in` (of the full tensor) scales
  // Uniform init; a sliced dummy tensor equals the same slice of the whole one. A checkpoint
  // reads only the slice from its memory mapping.
  virtual void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit init, int64_t fan_in,
                    const WeightSlice& slice) = 0;
  // `slice` of tensor `name` (HF shape `shape`) as f32 on the host, for weights the model
  // rearranges at load (gpt-oss's experts: transposed, gate and up interleaved). A checkpoint
  // holding it in MXFP4 (name + "_blocks" [.., N, K / 32, 16] and "_scales" [.., N, K / 32] for
  // shape [.., K, N], model/mxfp4.h) dequantizes it.
  virtual std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                                       const WeightSlice& slice) = 0;
  // Writes element at(i) of tensor `name` (HF shape `shape`, flat row-major index) into dst[i], for
  // weights the model rearranges at load, where the source computes its elements (dummy weights:
  // in place, on the backend); false: it cannot, and the caller rearranges load_host's values.
  virtual bool fill_gathered(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                             const SliceIndex& at, const Tensor& dst) {
    (void)name, (void)shape, (void)init, (void)fan_in, (void)at, (void)dst;
    return false;
  }
  // The value of scalar tensor `name` (one element: the FP8 KV cache's k_scale / v_scale) if the
  // source has it; a dummy source has none.
  virtual std::optional<float> scalar(const std::string& name) = 0;
  // The tensors whose names start with `prefix` (another expert-parallel rank's experts: e.g.
  // "model.layers.3.mlp.experts.17.") are not loaded by this rank: finish() counts them as claimed.
  virtual void skip(const std::string& prefix) { (void)prefix; }
  // Called after every tensor was loaded: a checkpoint rejects tensors nobody asked for.
  virtual void finish() {}
};

// Tensors of the safetensors checkpoint in `dir`. Errors name the file and the tensor.
std::unique_ptr<WeightSource> make_checkpoint_source(const std::string& dir, Backend& backend, const ModelConfig& cfg);
// Uniform(-a, a) with a = sqrt(3 / fan_in) (std 1/sqrt(fan_in)), norms 1, biases 0; the values
// depend only on (seed, tensor name, element index).
std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, Backend& backend);

}  // namespace gs
