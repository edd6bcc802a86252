// gpt-oss's tensors as the Hub holds them, converted into the layouts the ops take:
//   self_attn.o_proj.bias [H], self_attn.sinks [heads];
//   mlp.router.weight [E, H] and .bias [E];
//   mlp.experts.gate_up_proj [E, H, 2I] (HF computes x @ gate_up_proj: the transpose of a linear
//   weight, gate in the even columns, up in the odd ones) with gate_up_proj_bias [E, 2I], and
//   down_proj [E, I, H] with down_proj_bias [E, H]; in MXFP4 checkpoints the experts come as
//   _blocks / _scales, which the WeightSource dequantizes (model/mxfp4.h).
// Backend::moe_experts takes expert e's gate rows then its up rows ([2I, H]) and its down rows
// ([H, I]); a tensor-parallel rank takes its channels [b, b + I / N) of every expert, or under
// expert parallelism its experts (TpLayout::experts) whole, with their biases.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "model/llama_weights.h"

namespace gs {

namespace {

// out[r, c] = in[at(r cols + c) - base] for r < rows, c < cols = at.run: the strided transpose
// that SliceIndex `at` describes (in[0] is the whole tensor's element `base`), in tiles that keep
// both sides in cache.
void gather_transposed(const float* in, const SliceIndex& at, int64_t base, int64_t rows, float* out) {
  constexpr int64_t kTile = 32;
  const int64_t cols = at.run, first = at.offset - base;
#pragma omp parallel for collapse(2) if (rows * cols > 65536)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t c = c0; c < std::min(c0 + kTile, cols); ++c)
        for (int64_t r = r0; r < std::min(r0 + kTile, rows); ++r)
          out[r * cols + c] = in[c * at.inner + first + r * at.stride];
}

class GptOssLoader {
 public:
  GptOssLoader(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src)
      : cfg_(cfg), tp_(tp), be_(backend), src_(src) {}

  void layer(const std::string& p, LlamaLayerWeights& w) {
    const int64_t H = cfg_.hidden_size;
    if (cfg_.o_proj_bias) {  // every rank reads it (the checkpoint's tensors must all be claimed); rank 0 adds it
      Tensor b = Tensor::empty({H}, be_.compute_dtype(), be_.allocator());
      src_.load(p + "self_attn.o_proj.bias", {H}, b, WeightInit::Zeros, 0, {});
      if (tp_.rank == 0) w.o_bias = b;
    }
    const int64_t lq = tp_.local.num_heads;
    w.sinks = Tensor::empty({lq}, DType::F32, be_.allocator());
    src_.load(p + "self_attn.sinks", {cfg_.num_heads}, w.sinks, WeightInit::Zeros, 0, {0, tp_.head_begin, lq});
    moe(p + "mlp.", w.moe);
  }

 private:
  void moe(const std::string& p, MoeLayerWeights& w) {
    const int64_t H = cfg_.hidden_size, E = cfg_.moe.num_experts, I = cfg_.moe.expert_intermediate;
    const int64_t li = tp_.local.moe.expert_intermediate, b = tp_.expert_inter_begin;
    const DType dt = be_.compute_dtype();
    w.router = Tensor::empty({E, H}, dt, be_.allocator());
    src_.load(p + "router.weight", {E, H}, w.router, WeightInit::Uniform, H, {});
    w.router_bias = Tensor::empty({E}, dt, be_.allocator());
    src_.load(p + "router.bias", {E}, w.router_bias, WeightInit::Zeros, 0, {});
    const TpRange held = tp_.experts();
    const int64_t n = held.count;
    w.experts_gate_up = Tensor::empty({n * 2 * li, H}, dt, be_.allocator());
    w.experts_down = Tensor::empty({n * H, li}, dt, be_.allocator());
    const std::string gu_name = p + "experts.gate_up_proj", dn_name = p + "experts.down_proj";
    const Shape gu_shape{E, H, 2 * I}, dn_shape{E, I, H};
    std::vector<float> rows;
    for (int64_t l = 0; l < n; ++l) {
      // Expert e's gate rows (the even columns of the rank's channels of its [H, 2I]), up rows (the
      // odd ones) and down rows (its [I, H] transposed), as indices into the whole HF tensors.
      const int64_t e = held.begin + l, gu0 = e * H * 2 * I, dn0 = e * I * H;
      const SliceIndex gate{H, 2, gu0 + 2 * b, 2 * I}, up{H, 2, gu0 + 2 * b + 1, 2 * I}, down{li, 1, dn0 + b * H, H};
      const Tensor gu_rows = w.experts_gate_up.rows(l * 2 * li, 2 * li), dn_rows = w.experts_down.rows(l * H, H);
      // A source that computes its elements (dummy weights) writes them in place; a checkpoint's
      // are read and rearranged on the host.
      if (src_.fill_gathered(gu_name, gu_shape, WeightInit::Uniform, H, gate, gu_rows.rows(0, li)) &&
          src_.fill_gathered(gu_name, gu_shape, WeightInit::Uniform, H, up, gu_rows.rows(li, li)) &&
          src_.fill_gathered(dn_name, dn_shape, WeightInit::Uniform, I, down, dn_rows))
        continue;
      const WeightSlice expert{0, e, 1};
      const std::vector<float> gu = src_.load_host(gu_name, gu_shape, WeightInit::Uniform, H, expert);  // [H, 2I]
      rows.resize(size_t(2 * li * H));
      gather_transposed(gu.data(), gate, gu0, li, rows.data());
      gather_transposed(gu.data(), up, gu0, li, rows.data() + li * H);
      upload(gu_rows, rows);
      const std::vector<float> dn = src_.load_host(dn_name, dn_shape, WeightInit::Uniform, I, expert);  // [I, H]
      rows.resize(size_t(H * li));
      gather_transposed(dn.data(), down, dn0, H, rows.data());
      upload(dn_rows, rows);
    }
    const std::vector<float> gub =
        src_.load_host(p + "experts.gate_up_proj_bias", {E, 2 * I}, WeightInit::Zeros, 0, {});
    rows.resize(size_t(n * 2 * li));
    for (int64_t l = 0; l < n; ++l)
      for (int64_t i = 0; i < li; ++i) {
        const int64_t e = held.begin + l;
        rows[size_t(l * 2 * li + i)] = gub[size_t(e * 2 * I + 2 * (b + i))];
        rows[size_t(l * 2 * li + li + i)] = gub[size_t(e * 2 * I + 2 * (b + i) + 1)];
      }
    w.experts_gate_up_bias = Tensor::empty({n, 2 * li}, DType::F32, be_.allocator());
    upload(w.experts_gate_up_bias, rows);
    // Added once per pair: by rank 0 where every rank computes a share of each expert's output,
    // by the expert's rank under expert parallelism.
    const std::vector<float> db = src_.load_host(p + "experts.down_proj_bias", {E, H}, WeightInit::Zeros, 0, {});
    if (tp_.expert_parallel || tp_.rank == 0) {
      w.experts_down_bias = Tensor::empty({n, H}, DType::F32, be_.allocator());
      upload(w.experts_down_bias, {db.begin() + held.begin * H, db.begin() + (held.begin + n) * H});
    }
  }

  // Host f32 values into `dst` (any float dtype), synchronously (the buffer is reused).
  void upload(const Tensor& dst, const std::vector<float>& host) {
    GS_CHECK(int64_t(host.size()) == dst.numel(), "gpt-oss weights: {} values for {}", host.size(), dst.str());
    const size_t n = host.size(), es = dtype_size(dst.dtype()), chunk = size_t(1) << 16;
    staging_.resize(n * es);
#pragma omp parallel for if (n > chunk)
    for (size_t c = 0; c < n; c += chunk)
      convert_host(host.data() + c, DType::F32, staging_.data() + c * es, dst.dtype(), std::min(chunk, n - c));
    be_.copy(dst, Tensor::wrap(staging_.data(), dst.shape(), dst.dtype(), Device::cpu()));
    be_.stream().synchronize();
  }

  const ModelConfig& cfg_;
  const TpLayout& tp_;
  Backend& be_;
  WeightSource& src_;
  std::vector<uint8_t> staging_;
};

}  // namespace

void load_gpt_oss_layer(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src,
                        const std::string& p, LlamaLayerWeights& w) {
  GS_CHECK(cfg.moe.enabled(), "gpt-oss weights: the config has no experts");
  GptOssLoader(cfg, tp, backend, src).layer(p, w);
}

}  // namespace gs
