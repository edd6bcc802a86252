// WeightLoader: allocates a model's weights on the backend and fills them from a WeightSource
// (HF tensor names), whole or as one tensor-parallel rank's slices (TpLayout), in the compute
// dtype or FP8 where the model is quantized (QuantConfig): the pieces every model's loader is
// built of (llama_weights.cpp, deepseek_model.cpp).
#pragma once
#include <array>
#include <string>

#include "model/model_config.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"
#include "ops/backend.h"

namespace gs {

class WeightLoader {
 public:
  WeightLoader(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src)
      : cfg_(cfg), tp_(tp), be_(backend), src_(src) {}

  // An uninitialized tensor in the compute dtype.
  Tensor alloc(const Shape& s);
  // A projection weight [out, in] of `module` (its first part): FP8 with its scales where the
  // model is quantized, the backend computes in FP8, the loader keeps FP8 (keep_fp8_) and the
  // module is no expert, else in the compute dtype.
  Tensor proj(const std::string& module, int64_t out, int64_t in);
  // `slice` of HF tensor `name` (full shape `shape`) into rows [row, ...) of `dst`, quantized
  // where dst is FP8 or the model is quantized at load (quantized_at_load: on a backend without
  // FP8 weights dst then holds the dequantized values, the FP8 model's arithmetic in its dtype).
  void part(const Tensor& dst, int64_t row, const std::string& name, const Shape& shape, WeightInit init,
            int64_t fan_in, const WeightSlice& slice = {});
  // A whole [out, in] matrix in the compute dtype.
  Tensor matrix(const std::string& name, int64_t out, int64_t in);
  // Rows [begin, begin + count) of an [out, in] matrix (a column-parallel rank's).
  static WeightSlice rows(int64_t begin, int64_t count) { return {0, begin, count}; }
  // Rows [begin, begin + count) of HF matrix `name` [out, in] as a projection weight.
  Tensor column_parallel(const std::string& name, int64_t out, int64_t in, int64_t begin, int64_t count);
  // This rank's input columns of a row-parallel [out, in] matrix: [in / N] from rank * in / N.
  Tensor row_parallel(const std::string& name, int64_t out, int64_t in);
  // Rows [begin, begin + count) of HF matrices `gate` and `up` (each [rows, in]) stacked into one
  // projection weight [2 count, in], gate over up.
  Tensor stacked(const std::string& gate, const std::string& up, int64_t rows, int64_t in, int64_t begin,
                 int64_t count);
  // Every routed expert's rows of this rank's channels (gate / up rows, down columns) from
  // `prefix`N.`names` (gate, up, down) into Backend::moe_experts' layout: gate_up [E 2 I_rank, H],
  // down [E H, I_rank]; under expert parallelism the rank's experts only (TpLayout::experts), whole
  // (the other experts' tensors are WeightSource::skip'ped). FP8 with scales where fp8_experts()
  // and the backend computes in FP8, else in the compute dtype.
  void routed_experts(const std::string& prefix, const std::array<std::string, 3>& names, Tensor& gate_up,
                      Tensor& down);
  // Vocab-parallel rows of an embedding or lm_head [V, H] (zero rows past the vocabulary).
  Tensor vocab_rows(const std::string& name);
  Tensor vector(const std::string& name, int64_t n, WeightInit init);  // in the compute dtype
  Tensor vector(const std::string& name, int64_t n, WeightInit init, DType dt);
  // An RMSNorm weight; Gemma's (which multiply by 1 + w) are stored as 1 + w, added in f32.
  Tensor norm(const std::string& name, int64_t n);

  // "x.weight" -> "x".
  static std::string module_of(const std::string& name);

  // Layer `layer_prefix`'s FP8 KV-cache scale of k or v (`kv`) under any of the names checkpoints
  // use (vLLM's self_attn.k_scale, compressed-tensors' k_proj.output_scale, the older kv_scale for
  // both), else 1.
  float kv_scale(const std::string& layer_prefix, const std::string& kv);

 protected:
  const ModelConfig& cfg_;
  const TpLayout& tp_;
  Backend& be_;
  WeightSource& src_;
  bool keep_fp8_ = true;  // false: an FP8 checkpoint's projections are dequantized at load
  bool experts_logged_ = false;

 private:
  // The part's values to FP8, scaled in the groups of the checkpoint's layout (so that its exact
  // values come back), per output channel when quantized at load.
  void quantize(const Tensor& part, const Tensor& dst, int64_t rows);
  // An FP8 weight [out, in] with the model's scale layout (a scale a row, or a 128-k block).
  Tensor fp8_weight(int64_t out, int64_t in);
  // Routed experts are FP8 (module: the first expert's gate) where the model is quantized and
  // both of their K widths, the hidden size and this rank's expert width, are multiples of 128
  // (the scale blocks of Backend::moe_experts' FP8 form). Elsewhere they keep the compute dtype:
  // an FP8 checkpoint's are dequantized exactly and --quantization fp8 leaves them as they are.
  // Shared experts always keep the compute dtype.
  bool fp8_experts(const std::string& module) const;
  // Whether --quantization fp8 rounds HF tensor `name` through e4m3: the projections the model
  // quantizes (no shared expert), and the routed experts where fp8_experts(). A loader that keeps
  // no FP8 projections (!keep_fp8_: DeepSeek's) rounds only the routed experts, which compute in
  // FP8; a dummy FP8 checkpoint's projections are rounded as the checkpoint's values are.
  bool quantized_at_load(const std::string& name) const;
  static bool is_routed_expert(const std::string& name);  // a routed expert's tensor
  static bool is_expert(const std::string& name);         // a routed or the shared expert's
  static bool is_projection(const std::string& name);
};

}  // namespace gs
