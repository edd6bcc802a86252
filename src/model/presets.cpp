// Implements model/presets.h.
#include "model/presets.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gs {

namespace {

struct Shape_ {
  Architecture arch;
  const char* arch_name;
  int vocab, hidden, inter, layers, heads, kv_heads, head_dim;
  float eps, theta;
  bool tied;
  int max_pos, bos;
  std::vector<int> eos;
};

ModelConfig make(const Shape_& s) {
  ModelConfig c;
  c.arch = s.arch;
  c.architecture_name = s.arch_name;
  c.vocab_size = s.vocab, c.hidden_size = s.hidden, c.intermediate_size = s.inter;
  c.num_layers = s.layers, c.num_heads = s.heads, c.num_kv_heads = s.kv_heads, c.head_dim = s.head_dim;
  c.rms_norm_eps = s.eps;
  c.rope.theta = s.theta;
  c.rope.head_dim = s.head_dim;
  c.tie_word_embeddings = s.tied;
  c.attention_bias = s.arch == Architecture::Qwen2;
  c.qk_norm = s.arch == Architecture::Qwen3 || s.arch == Architecture::Qwen3Moe;
  c.max_position_embeddings = s.max_pos;
  c.bos_token_id = s.bos;
  c.eos_token_ids = s.eos;
  c.torch_dtype = DType::BF16;
  return c;
}

ModelConfig with_llama3_rope(ModelConfig c, float factor) {
  c.rope.llama3_factor = factor;
  c.rope.llama3_low_freq_factor = 1.0f;
  c.rope.llama3_high_freq_factor = 4.0f;
  c.rope.llama3_original_max_position = 8192;
  return c;
}

// Phi-3-mini-4k: fused checkpoint weights, a 2047-token window on every layer.
ModelConfig phi3_mini() {
  ModelConfig c = make({Architecture::Phi3,
                        "Phi3ForCausalLM",
                        32064,
                        3072,
                        8192,
                        32,
                        32,
                        32,
                        96,
                        1e-5f,
                        1e4f,
                        false,
                        4096,
                        1,
                        {32000, 32007}});
  c.layer_windows.assign(size_t(c.num_layers), 2047);
  return c;
}

// Gemma-2-2B: 1 + w norms around attention and MLP, GeGLU, soft-capping, windows on even layers.
ModelConfig gemma2_2b() {
  ModelConfig c = make({Architecture::Gemma2,
                        "Gemma2ForCausalLM",
                        256000,
                        2304,
                        9216,
                        26,
                        8,
                        4,
                        256,
                        1e-6f,
                        1e4f,
                        true,
                        8192,
                        2,
                        {1, 107}});
  c.activation = Activation::GeluTanh;
  c.gemma_norms = true;
  c.attn_softcap = 50.0f;
  c.final_softcap = 30.0f;
  c.query_pre_attn_scalar = 256.0f;
  for (int i = 0; i < c.num_layers; ++i) c.layer_windows.push_back(i % 2 == 0 ? 4096 : -1);
  return c;
}

// A mixture of experts on every layer: E experts of width I, top k, softmax scores.
ModelConfig with_experts(ModelConfig c, int E, int k, int I, bool renormalize) {
  c.moe.num_experts = E;
  c.moe.expert_intermediate = I;
  c.moe.routing.num_experts = E;
  c.moe.routing.top_k = k;
  c.moe.routing.renormalize = renormalize;
  c.moe.sparse_layers.assign(size_t(c.num_layers), true);
  return c;
}

// Mixtral-8x7B: 8 experts of width 14336, top 2.
ModelConfig mixtral_8x7b() {
  ModelConfig c = make({Architecture::Mixtral,
                        "MixtralForCausalLM",
                        32000,
                        4096,
                        14336,
                        32,
                        32,
                        8,
                        128,
                        1e-5f,
                        1e6f,
                        false,
                        32768,
                        1,
                        {2}});
  return with_experts(c, 8, 2, 14336, true);
}

// Qwen3-30B-A3B: 128 experts of width 768, top 8, renormalised (norm_topk_prob).
ModelConfig qwen3_30b_a3b() {
  ModelConfig c = make({Architecture::Qwen3Moe,
                        "Qwen3MoeForCausalLM",
                        151936,
                        2048,
                        6144,
                        48,
                        32,
                        4,
                        128,
                        1e-6f,
                        1e6f,
                        false,
                        40960,
                        151643,
                        {151645, 151643}});
  return with_experts(c, 128, 8, 768, true);
}

// gpt-oss: every layer a biased mixture of E experts (top k, clamped SwiGLU of limit 7) with
// attention sinks and q/k/v/o biases, even layers sliding over `window` tokens, YaRN rope.
ModelConfig with_gpt_oss(ModelConfig c, int E, int k, int window, float yarn_factor, int yarn_original) {
  c = with_experts(c, E, k, c.intermediate_size, true);
  c.moe.router_bias = c.moe.expert_bias = true;
  c.moe.swiglu_limit = 7.0f;
  c.activation = Activation::ClampedSwiglu;
  c.attention_bias = c.o_proj_bias = c.attention_sinks = true;
  for (int i = 0; i < c.num_layers; ++i) c.layer_windows.push_back(i % 2 == 0 ? window : -1);
  c.rope.yarn_factor = yarn_factor;
  c.rope.yarn_original_max_position = yarn_original;
  c.rope.yarn_truncate = false;
  c.rope_attention_factor = yarn_attention_factor(yarn_factor);
  return c;
}

// gpt-oss-20b: 32 experts of width 2880, top 4; windows of 128 on even layers; YaRN x32 from 4096.
ModelConfig gpt_oss_20b() {
  ModelConfig c = make({Architecture::GptOss,
                        "GptOssForCausalLM",
                        201088,
                        2880,
                        2880,
                        24,
                        64,
                        8,
                        64,
                        1e-5f,
                        150000.0f,
                        false,
                        131072,
                        199998,
                        {200002, 199999, 200012}});
  return with_gpt_oss(c, 32, 4, 128, 32.0f, 4096);
}

std::string format_params(double n) {
  return n >= 1e9 ? fmt::format("{:.2f}B", n / 1e9) : fmt::format("{:.1f}M", n / 1e6);
}

std::string describe(const char* what, const ModelConfig& c) {
  std::string params = format_params(double(c.num_parameters()));
  if (c.moe.enabled())
    params += fmt::format(" ({} active; {} experts, top {})", format_params(double(c.num_active_parameters())),
                          c.moe.num_experts, c.moe.routing.top_k);
  return fmt::format("{} shape ({}, {} layers, hidden {}, GQA {}/{}, vocab {}, {} params)", what, c.architecture_name,
                     c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size, params);
}

std::vector<Preset> build() {
  using A = Architecture;
  const char* llama = "LlamaForCausalLM";
  std::vector<std::pair<const char*, std::pair<const char*, ModelConfig>>> p = {
      {"tiny", {"stories260K", make({A::Llama, llama, 512, 64, 172, 5, 8, 4, 8, 1e-5f, 1e4f, true, 512, 1, {2}})}},
      {"tiny-qwen2",
       {"tiny Qwen2 (q/k/v bias)",
        make({A::Qwen2, "Qwen2ForCausalLM", 512, 64, 128, 2, 4, 2, 16, 1e-6f, 1e6f, false, 512, 1, {2}})}},
      {"tiny-qwen3",
       {"tiny Qwen3 (q/k norm)",
        make({A::Qwen3, "Qwen3ForCausalLM", 512, 64, 128, 2, 4, 2, 32, 1e-6f, 1e6f, true, 512, 1, {2}})}},
      {"tiny-qwen2-151k",  // a real tokenizer's vocabulary on a tiny body (structured-output tests)
       {"tiny Qwen2 with Qwen2.5's 151936-token vocabulary", make({A::Qwen2,
                                                                   "Qwen2ForCausalLM",
                                                                   151936,
                                                                   64,
                                                                   128,
                                                                   2,
                                                                   4,
                                                                   2,
                                                                   16,
                                                                   1e-6f,
                                                                   1e6f,
                                                                   true,
                                                                   4096,
                                                                   151643,
                                                                   {151645, 151643}})}},
      {"smollm2-135m",
       {"SmolLM2-135M", make({A::Llama, llama, 49152, 576, 1536, 30, 9, 3, 64, 1e-5f, 1e5f, true, 8192, 1, {2}})}},
      {"qwen2.5-0.5b",
       {"Qwen2.5-0.5B", make({A::Qwen2,
                              "Qwen2ForCausalLM",
                              151936,
                              896,
                              4864,
                              24,
                              14,
                              2,
                              64,
                              1e-6f,
                              1e6f,
                              true,
                              32768,
                              151643,
                              {151645, 151643}})}},
      {"qwen3-0.6b",
       {"Qwen3-0.6B", make({A::Qwen3,
                            "Qwen3ForCausalLM",
                            151936,
                            1024,
                            3072,
                            28,
                            16,
                            8,
                            128,
                            1e-6f,
                            1e6f,
                            true,
                            40960,
                            151643,
                            {151645, 151643}})}},
      {"llama3.2-1b",
       {"Llama-3.2-1B",
        with_llama3_rope(
            make({A::Llama, llama, 128256, 2048, 8192, 16, 32, 8, 64, 1e-5f, 5e5f, true, 131072, 128000, {128001}}),
            32.0f)}},
      {"llama3.1-8b",
       {"Llama-3.1-8B",
        with_llama3_rope(
            make({A::Llama, llama, 128256, 4096, 14336, 32, 32, 8, 128, 1e-5f, 5e5f, false, 131072, 128000, {128001}}),
            8.0f)}},
      {"phi3-mini", {"Phi-3-mini-4k", phi3_mini()}},
      {"gemma2-2b", {"Gemma-2-2B", gemma2_2b()}},
      {"tiny-qwen3-moe",
       {"tiny Qwen3-MoE (16 experts, top 4)",
        with_experts(
            make({A::Qwen3Moe, "Qwen3MoeForCausalLM", 512, 64, 128, 2, 4, 2, 32, 1e-6f, 1e6f, true, 512, 1, {2}}), 16,
            4, 32, true)}},
      {"mixtral-8x7b", {"Mixtral-8x7B", mixtral_8x7b()}},
      {"qwen3-30b-a3b", {"Qwen3-30B-A3B", qwen3_30b_a3b()}},
      {"tiny-gpt-oss",
       {"tiny gpt-oss (8 experts, top 2, sinks, windows of 16 on even layers)",
        with_gpt_oss(
            make({A::GptOss, "GptOssForCausalLM", 512, 64, 32, 2, 4, 2, 16, 1e-5f, 150000.0f, false, 512, 1, {2}}), 8,
            2, 16, 4.0f, 128)}},
      {"gpt-oss-20b", {"gpt-oss-20b", gpt_oss_20b()}},
      {"deepseek-v2-lite", {"DeepSeek-V2-Lite", deepseek_v2_lite_config()}},
  };
  std::vector<Preset> out;
  for (auto& [name, d] : p) out.push_back({name, describe(d.first, d.second), d.second});
  return out;
}

}  // namespace

const std::vector<Preset>& builtin_presets() {
  static const std::vector<Preset> presets = build();  // immutable after first use
  return presets;
}

const Preset& find_preset(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : builtin_presets()) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  fail("unknown preset '{}' (valid: {})", name, fmt::join(names, ", "));
}

}  // namespace gs
