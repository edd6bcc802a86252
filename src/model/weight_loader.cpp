// Implements model/weight_loader.h.
#include "model/weight_loader.h"

#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "ops/fp8_weights.h"

namespace gs {

Tensor WeightLoader::alloc(const Shape& s) { return Tensor::empty(s, be_.compute_dtype(), be_.allocator()); }

Tensor WeightLoader::proj(const std::string& module, int64_t out, int64_t in) {
  if (!keep_fp8_ || is_expert(module) || !cfg_.quant.quantizes(module) || !be_.fp8_weights()) return alloc({out, in});
  return fp8_weight(out, in);
}

Tensor WeightLoader::fp8_weight(int64_t out, int64_t in) {
  const int64_t groups = cfg_.quant.scales == Fp8WeightScales::Block ? (in + kFp8BlockK - 1) / kFp8BlockK : 1;
  return Tensor::empty({out, in}, DType::F8E4M3, be_.allocator())
      .with_scales(Tensor::empty({out, groups}, DType::F32, be_.allocator()));
}

void WeightLoader::part(const Tensor& dst, int64_t row, const std::string& name, const Shape& shape, WeightInit init,
                        int64_t fan_in, const WeightSlice& slice) {
  const Shape s = slice.shape_of(shape);
  Tensor d = dst.rows(row, s[0]);
  int64_t count = 1;
  for (int64_t e : s) count *= e;
  GS_CHECK(d.numel() == count, "{}: slice {} does not fill {}", name, shape_str(s), d.str());
  const bool fp8 = d.dtype() == DType::F8E4M3;
  const Tensor f = fp8 ? Tensor::empty(d.shape(), DType::F32, be_.allocator()) : d;
  src_.load(name, shape, f, init, fan_in, slice);
  const bool online = (cfg_.quant.online || cfg_.quant.dummy) && quantized_at_load(name);
  if (fp8 || online) quantize(f, d, s[0]);
  if (fp8) be_.stream().synchronize();  // f is freed on return
}

void WeightLoader::quantize(const Tensor& part, const Tensor& dst, int64_t rows) {
  const Fp8WeightScales sc = cfg_.quant.online ? Fp8WeightScales::Channel : cfg_.quant.scales;
  const int64_t group_rows = sc == Fp8WeightScales::Tensor ? rows : sc == Fp8WeightScales::Block ? kFp8BlockK : 1;
  be_.quantize_fp8(part, group_rows, sc == Fp8WeightScales::Block, dst);
}

bool WeightLoader::is_routed_expert(const std::string& name) { return name.find(".experts.") != std::string::npos; }

bool WeightLoader::is_expert(const std::string& name) {
  return is_routed_expert(name) || name.find(".shared_expert.") != std::string::npos;
}

bool WeightLoader::fp8_experts(const std::string& module) const {
  const int64_t li = tp_.local.moe.expert_intermediate;
  return cfg_.quant.fp8 && cfg_.hidden_size % kFp8BlockK == 0 && li > 0 && li % kFp8BlockK == 0 &&
         cfg_.quant.quantizes(module);
}

bool WeightLoader::quantized_at_load(const std::string& name) const {
  const std::string module = module_of(name);
  if (is_routed_expert(name)) return fp8_experts(module);
  if (!keep_fp8_ && cfg_.quant.online) return false;
  return is_projection(name) && !is_expert(name) && cfg_.quant.quantizes(module);
}

bool WeightLoader::is_projection(const std::string& name) {
  const std::string p = "_proj.weight";
  return name.size() > p.size() && name.compare(name.size() - p.size(), p.size(), p) == 0;
}

float WeightLoader::kv_scale(const std::string& p, const std::string& kv) {
  std::optional<float> found;
  for (const std::string& n : {p + "self_attn." + kv + "_scale", p + "self_attn.attn." + kv + "_scale",
                               p + "self_attn." + kv + "_proj.output_scale", p + "self_attn.kv_scale"})
    if (const std::optional<float> v = src_.scalar(n); v && !found) found = v;
  return found.value_or(1.0f);
}

std::string WeightLoader::module_of(const std::string& name) {
  const std::string w = ".weight";
  return name.size() > w.size() && name.compare(name.size() - w.size(), w.size(), w) == 0
             ? name.substr(0, name.size() - w.size())
             : name;
}

Tensor WeightLoader::matrix(const std::string& name, int64_t out, int64_t in) {
  Tensor t = alloc({out, in});
  part(t, 0, name, {out, in}, WeightInit::Uniform, in);
  return t;
}

Tensor WeightLoader::column_parallel(const std::string& name, int64_t out, int64_t in, int64_t begin, int64_t count) {
  Tensor t = proj(module_of(name), count, in);
  part(t, 0, name, {out, in}, WeightInit::Uniform, in, rows(begin, count));
  return t;
}

Tensor WeightLoader::row_parallel(const std::string& name, int64_t out, int64_t in) {
  const int64_t k = in / tp_.size;
  Tensor t = proj(module_of(name), out, k);
  part(t, 0, name, {out, in}, WeightInit::Uniform, in, {1, tp_.rank * k, k});
  return t;
}

Tensor WeightLoader::stacked(const std::string& gate, const std::string& up, int64_t rows, int64_t in, int64_t begin,
                             int64_t count) {
  Tensor t = proj(module_of(gate), 2 * count, in);
  part(t, 0, gate, {rows, in}, WeightInit::Uniform, in, WeightLoader::rows(begin, count));
  part(t, count, up, {rows, in}, WeightInit::Uniform, in, WeightLoader::rows(begin, count));
  return t;
}

void WeightLoader::routed_experts(const std::string& prefix, const std::array<std::string, 3>& names, Tensor& gate_up,
                                  Tensor& down) {
  const MoeConfig& m = cfg_.moe;
  const int64_t H = cfg_.hidden_size, E = m.num_experts, I = m.expert_intermediate;
  const int64_t li = tp_.local.moe.expert_intermediate, i0 = tp_.expert_inter_begin;
  const bool fp8 = be_.fp8_weights() && fp8_experts(prefix + "0." + module_of(names[0]));
  if (cfg_.quant.fp8 && !experts_logged_) {
    experts_logged_ = true;
    if (fp8)
      spdlog::info("MoE: the routed experts are FP8 e4m3 ({}), run by moe_experts' FP8 form", cfg_.quant.describe());
    else
      spdlog::info(
          "MoE: the routed experts stay {} ({}; FP8 experts need a backend computing in FP8 (CUDA, bf16) and hidden "
          "size {} and this rank's expert width {} multiples of 128); an FP8 checkpoint's are dequantized at load",
          dtype_name(be_.compute_dtype()), cfg_.quant.describe(), cfg_.hidden_size, li);
  }
  const TpRange held = tp_.experts();
  const int64_t n = held.count;
  gate_up = fp8 ? fp8_weight(n * 2 * li, H) : alloc({n * 2 * li, H});
  down = fp8 ? fp8_weight(n * H, li) : alloc({n * H, li});
  for (int64_t e = 0; e < E; ++e) {
    const std::string x = prefix + std::to_string(e) + ".";
    const int64_t l = e - held.begin;  // the expert's index on this rank
    if (l < 0 || l >= n) {
      src_.skip(x);  // another expert-parallel rank's
      continue;
    }
    part(gate_up, l * 2 * li, x + names[0], {I, H}, WeightInit::Uniform, H, rows(i0, li));
    part(gate_up, l * 2 * li + li, x + names[1], {I, H}, WeightInit::Uniform, H, rows(i0, li));
    part(down, l * H, x + names[2], {H, I}, WeightInit::Uniform, I, {1, i0, li});
  }
}

Tensor WeightLoader::vocab_rows(const std::string& name) {
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size;
  if (!tp_.sharded()) return matrix(name, V, H);
  Tensor t = alloc({tp_.vocab_shard, H});
  be_.fill_zero(t);
  if (tp_.vocab_count > 0) part(t, 0, name, {V, H}, WeightInit::Uniform, H, rows(tp_.vocab_begin, tp_.vocab_count));
  return t;
}

Tensor WeightLoader::vector(const std::string& name, int64_t n, WeightInit init) {
  return vector(name, n, init, be_.compute_dtype());
}

Tensor WeightLoader::vector(const std::string& name, int64_t n, WeightInit init, DType dt) {
  Tensor t = Tensor::empty({n}, dt, be_.allocator());
  part(t, 0, name, {n}, init, 0);
  return t;
}

Tensor WeightLoader::norm(const std::string& name, int64_t n) {
  if (!cfg_.gemma_norms) return vector(name, n, WeightInit::Ones);
  Tensor t = vector(name, n, WeightInit::Zeros);
  std::vector<uint8_t> raw(size_t(n) * dtype_size(t.dtype()));
  be_.copy(Tensor::wrap(raw.data(), t.shape(), t.dtype(), Device::cpu()), t);
  be_.stream().synchronize();
  std::vector<float> w(static_cast<size_t>(n), 0.0f);
  convert_host(raw.data(), t.dtype(), w.data(), DType::F32, size_t(n));
  for (float& x : w) x += 1.0f;
  return be_.upload(w.data(), DType::F32, t.shape(), t.dtype());
}

}  // namespace gs
