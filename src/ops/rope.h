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
  // YaRN (rope_type "yarn", HF _compute_yarn_parameters): yarn_factor > 0 blends each pair's
  // frequency between theta's and theta's / factor by a linear ramp over the pairs whose
  // rotations in yarn_original_max_position lie between beta_slow and beta_fast (the ramp's ends
  // rounded outwards with yarn_truncate). Its attention factor is the model's (MlaConfig).
  float yarn_factor = 0.0f;
  int yarn_original_max_position = 0;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  bool yarn_truncate = true;
};

// The inverse frequencies of each rotary pair (head_dim / 2 of them), llama3 scaling applied;
// with longrope, head_dim entries: the short-factor half, then the long-factor half.
std::vector<float> rope_inv_freq(const RopeConfig& cfg);
// Where the rotary table of position `pos` starts in rope_inv_freq's output.
inline int rope_table_offset(const RopeConfig& cfg, int pos) {
  return cfg.long_from > 0 && pos >= cfg.long_from ? cfg.head_dim / 2 : 0;
}

}  // namespace gs
