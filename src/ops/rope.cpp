// Implements ops/rope.h: the rotary inverse frequencies, with llama3 scaling (as HF's rope_init_fn).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/rope.h"

namespace gs {

namespace {
// HF _compute_llama3_parameters: long wavelengths are slowed by `factor`, short ones kept, and
// the band between is interpolated smoothly.
float llama3_scale(float inv_freq, const RopeConfig& c) {
  const double two_pi = 6.283185307179586;
  const double old_len = c.llama3_original_max_position;
  const double low_wavelen = old_len / c.llama3_low_freq_factor;
  const double high_wavelen = old_len / c.llama3_high_freq_factor;
  const double wavelen = two_pi / inv_freq;
  if (wavelen > low_wavelen) return float(inv_freq / c.llama3_factor);
  if (wavelen < high_wavelen) return inv_freq;
  const double smooth =
      (old_len / wavelen - c.llama3_low_freq_factor) / (c.llama3_high_freq_factor - c.llama3_low_freq_factor);
  return float((1.0 - smooth) * inv_freq / c.llama3_factor + smooth * inv_freq);
}

// HF _compute_yarn_parameters: frequencies extrapolated (kept) below the ramp, interpolated
// (divided by factor) above it, blended linearly on it.
void yarn_scale(std::vector<float>& f, const RopeConfig& c) {
  const double dim = c.head_dim, base = c.theta, two_pi = 6.283185307179586;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(c.yarn_original_max_position / (rotations * two_pi)) / (2 * std::log(base));
  };
  double low = correction_dim(c.yarn_beta_fast), high = correction_dim(c.yarn_beta_slow);
  if (c.yarn_truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  for (size_t i = 0; i < f.size(); ++i) {
    const float ramp = std::clamp((float(i) - float(low)) / (float(high) - float(low)), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    f[i] = f[i] / c.yarn_factor * (1.0f - extrapolation) + f[i] * extrapolation;
  }
}
}  // namespace

std::vector<float> rope_inv_freq(const RopeConfig& cfg) {
  GS_CHECK(cfg.head_dim > 0 && cfg.head_dim % 2 == 0, "rope: head_dim must be a positive even number, got {}",
           cfg.head_dim);
  GS_CHECK(cfg.theta > 0, "rope: rope_theta must be positive, got {}", cfg.theta);
  const size_t half = size_t(cfg.head_dim / 2);
  const bool longrope = cfg.long_from > 0;
  GS_CHECK(!longrope || (cfg.short_factor.size() == half && cfg.long_factor.size() == half),
           "rope: longrope needs {} short and long factors, got {} and {}", half, cfg.short_factor.size(),
           cfg.long_factor.size());
  std::vector<float> f(longrope ? 2 * half : half);
  for (size_t i = 0; i < half; ++i) {
    // float32 arithmetic as in HF: base ** (arange(0, dim, 2).float() / dim)
    const float expo = float(2 * i) / float(cfg.head_dim);
    const float pw = std::pow(cfg.theta, expo);
    f[i] = 1.0f / pw;
    if (cfg.llama3_factor > 0) f[i] = llama3_scale(f[i], cfg);
    if (longrope) {  // HF: 1 / (ext_factors * base ** (arange / dim))
      f[i] = 1.0f / (cfg.short_factor[i] * pw);
      f[half + i] = 1.0f / (cfg.long_factor[i] * pw);
    }
  }
  if (cfg.yarn_factor > 0) yarn_scale(f, cfg);
  return f;
}

}  // namespace gs
