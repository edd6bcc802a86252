// Implements ops/rope.h: the rotary inverse frequencies, with llama3 scaling (as HF's rope_init_fn).
#include <algorithm>
#include <cmath>
#include <utility>

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

// HF _compute_yarn_parameters' correction dim of `rotations` rotations.
double yarn_correction_dim(double rotations, const RopeConfig& c) {
  const double two_pi = 6.283185307179586;
  return c.head_dim * std::log(c.yarn_original_max_position / (rotations * two_pi)) / (2 * std::log(double(c.theta)));
}

// The correction range [low, high] of pairs (HF find_correction_range).
std::pair<double, double> yarn_range(const RopeConfig& c) {
  double low = yarn_correction_dim(c.yarn_beta_fast, c), high = yarn_correction_dim(c.yarn_beta_slow, c);
  if (c.yarn_truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, double(c.head_dim - 1));
  if (low == high) high += 0.001;  // HF: prevents a singular ramp
  return {low, high};
}

// Pair i's frequency, pw = theta^(2i/D): the interpolated one (1 / (factor pw)) and the
// extrapolated one (1 / pw) blended by the ramp, in float as HF.
float yarn_inv_freq(size_t i, float pw, const RopeConfig& c, std::pair<double, double> range) {
  const float ramp = std::clamp(float((float(i) - range.first) / (range.second - range.first)), 0.0f, 1.0f);
  const float extrapolation = 1.0f - ramp;
  return 1.0f / (c.yarn_factor * pw) * (1.0f - extrapolation) + 1.0f / pw * extrapolation;
}

}  // namespace

float yarn_attention_factor(float factor, float mscale, float mscale_all_dim) {
  auto get = [factor](float m) { return factor <= 1.0f ? 1.0 : 0.1 * m * std::log(double(factor)) + 1.0; };
  if (mscale != 0.0f && mscale_all_dim != 0.0f) return float(get(mscale) / get(mscale_all_dim));
  return float(get(1.0f));
}

std::vector<float> rope_inv_freq(const RopeConfig& cfg) {
  GS_CHECK(cfg.head_dim > 0 && cfg.head_dim % 2 == 0, "rope: head_dim must be a positive even number, got {}",
           cfg.head_dim);
  GS_CHECK(cfg.theta > 0, "rope: rope_theta must be positive, got {}", cfg.theta);
  const size_t half = size_t(cfg.head_dim / 2);
  const bool longrope = cfg.long_from > 0;
  GS_CHECK(!longrope || (cfg.short_factor.size() == half && cfg.long_factor.size() == half),
           "rope: longrope needs {} short and long factors, got {} and {}", half, cfg.short_factor.size(),
           cfg.long_factor.size());
  const bool yarn = cfg.yarn_factor > 0;
  GS_CHECK(!yarn || cfg.yarn_original_max_position > 0, "rope: YaRN needs original_max_position_embeddings > 0, got {}",
           cfg.yarn_original_max_position);
  const auto range = yarn ? yarn_range(cfg) : std::pair<double, double>{};
  std::vector<float> f(longrope ? 2 * half : half);
  for (size_t i = 0; i < half; ++i) {
    // float32 arithmetic as in HF: base ** (arange(0, dim, 2).float() / dim)
    const float expo = float(2 * i) / float(cfg.head_dim);
    const float pw = std::pow(cfg.theta, expo);
    f[i] = 1.0f / pw;
    if (cfg.llama3_factor > 0) f[i] = llama3_scale(f[i], cfg);
    if (yarn) f[i] = yarn_inv_freq(i, pw, cfg, range);
    if (longrope) {  // HF: 1 / (ext_factors * base ** (arange / dim))
      f[i] = 1.0f / (cfg.short_factor[i] * pw);
      f[half + i] = 1.0f / (cfg.long_factor[i] * pw);
    }
  }
  return f;
}

}  // namespace gs
