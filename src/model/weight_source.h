// WeightSource: where the named Hugging Face tensors of a model come from (a checkpoint, or
// deterministic random numbers), written straight into slices of the backend's weight tensors.
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"
#include "model/model_config.h"
#include "ops/backend.h"

namespace gs {

// How a dummy weight is initialised; a checkpoint ignores it.
enum class WeightInit { Ones, Zeros, Uniform };

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Writes tensor `name` (HF shape `shape`) into `dst` (a device view of exactly that many
  // elements, in the backend's compute dtype). `fan_in` scales Uniform init.
  virtual void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit init,
                    int64_t fan_in) = 0;
  // Called after every tensor was loaded: a checkpoint rejects tensors nobody asked for.
  virtual void finish() {}
};

// Tensors of the safetensors checkpoint in `dir`. Errors name the file and the tensor.
std::unique_ptr<WeightSource> make_checkpoint_source(const std::string& dir, Backend& backend, const ModelConfig& cfg);
// Uniform(-a, a) with a = sqrt(3 / fan_in) (std 1/sqrt(fan_in)), norms 1, biases 0; the values
// depend only on (seed, tensor name, element index).
std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, Backend& backend);

}  // namespace gs
