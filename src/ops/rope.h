// RopeConfig: the rotary position embedding of a model (HF's rope_theta and rope_scaling), and
// the inverse-frequency table the RoPE kernels read.
#pragma once
#include <vector>

namespace gs {

struct RopeConfig {
  float theta = 10000.0f;
  int head_dim = 0;  // rotary dims = head_dim (rotate-half layout, as HF Llama)
  // llama3 scaling (rope_scaling.rope_type == "llama3"); factor <= 0 means none.
  float llama3_factor = 0.0f;
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  int llama3_original_max_position = 8192;
  // longrope / su scaling (Phi-3): the inverse frequencies are divided by short_factor at
  // positions < long_from and by long_factor from there on (HF's per-step switch, made per
  // token); both have head_dim / 2 entries. long_from == 0 means none. Its attention_factor
  // scales cos and sin, so the model folds its square into the softmax scale.
  std::vector<float> short_factor, long_factor;
  int long_from = 0;
  // YaRN (rope_scaling.rope_type == "yarn"; factor <= 0 means none), as HF's
  // _compute_yarn_parameters: each pair's frequency blends its interpolation (divided by factor)
  // and its extrapolation (kept) by a linear ramp over the pairs between the correction dims of
  // beta_fast and beta_slow rotations within original_max_position (floored / ceiled when
  // truncate). Its attention factor scales cos and sin: the model folds its square into the
  // softmax scale (ModelConfig::rope_attention_factor).
  float yarn_factor = 0.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  int yarn_original_max_position = 0;
  bool yarn_truncate = true;
};

// YaRN's attention factor for `factor` (HF's get_mscale ratio: mscale and mscale_all_dim 0 when
// absent), 1 when factor <= 1.
float yarn_attention_factor(float factor, float mscale = 0.0f, float mscale_all_dim = 0.0f);

// The inverse frequencies of each rotary pair (head_dim / 2 of them), llama3 scaling applied;
// with longrope, head_dim entries: the short-factor half, then the long-factor half.
std::vector<float> rope_inv_freq(const RopeConfig& cfg);
// Where the rotary table of position `pos` starts in rope_inv_freq's output.
inline int rope_table_offset(const RopeConfig& cfg, int pos) {
  return cfg.long_from > 0 && pos >= cfg.long_from ? cfg.head_dim / 2 : 0;
}

}  // namespace gs
