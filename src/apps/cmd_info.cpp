// graphserve info: a model's config, parameter count and memory plan, the built-in presets, or the
// supported quantization schemes.
#include <fmt/format.h>

#include <string>

#include "apps/commands.h"
#include "apps/vllm_flag_table.h"
#include "core/error.h"
#include "model/deepseek_model.h"
#include "model/model_factory.h"

namespace gs {

namespace {

struct InfoOptions {
  bool presets = false;
  bool quantizations = false;
  std::string vllm_flags;  // "md" or "json": the vLLM flag table
  std::string model;
  std::string preset;
};

std::string gib(double bytes) { return fmt::format("{:.3f} GiB", bytes / double(1ull << 30)); }

const char* arch_label(const ModelConfig& c) { return c.architecture_name.c_str(); }

void print_config(const ModelConfig& c, const std::string& source) {
  fmt::print("model: {}\n", source);
  fmt::print("architecture: {}\n", arch_label(c));
  fmt::print("vocab_size: {}\nhidden_size: {}\nintermediate_size: {}\nnum_layers: {}\n", c.vocab_size, c.hidden_size,
             c.intermediate_size, c.num_layers);
  fmt::print("num_heads: {}\nnum_kv_heads: {}\nhead_dim: {}\n", c.num_heads, c.num_kv_heads, c.head_dim);
  fmt::print("rms_norm_eps: {}\nrope_theta: {}\n", c.rms_norm_eps, c.rope.theta);
  if (c.rope.llama3_factor > 0)
    fmt::print("rope_scaling: llama3 (factor {}, low {}, high {}, original {})\n", c.rope.llama3_factor,
               c.rope.llama3_low_freq_factor, c.rope.llama3_high_freq_factor, c.rope.llama3_original_max_position);
  if (c.rope.yarn_factor > 0)
    fmt::print("rope_scaling: yarn (factor {}, original {}, beta_fast {}, beta_slow {})\n", c.rope.yarn_factor,
               c.rope.yarn_original_max_position, c.rope.yarn_beta_fast, c.rope.yarn_beta_slow);
  fmt::print("tie_word_embeddings: {}\nattention_bias: {}\nqk_norm: {}\n", c.tie_word_embeddings, c.attention_bias,
             c.qk_norm);
  fmt::print("max_position_embeddings: {}\ntorch_dtype: {}\n", c.max_position_embeddings, dtype_name(c.torch_dtype));
  fmt::print("bos_token_id: {}\neos_token_ids: [{}]\n", c.bos_token_id, fmt::join(c.eos_token_ids, ", "));
  fmt::print("quantization: {}\n", c.quant.describe());
}

void print_memory_plan(const ModelConfig& c) {
  const double params = double(c.num_parameters());
  const KVLayout kv = kv_layout(c);  // multi-head latent attention: one latent row a token and layer
  const double kv_elems_per_token = double(kv.planes) * c.num_layers * kv.num_kv_heads * kv.head_dim;
  if (c.mla.enabled())
    fmt::print(
        "multi-head latent attention: kv_lora_rank {}, q_lora_rank {}, qk nope {} + rope {}, v {}; the KV "
        "cache holds {} values a token and layer (one shared latent row)\n",
        c.mla.kv_lora_rank, c.mla.q_lora_rank, c.mla.qk_nope_head_dim, c.mla.qk_rope_head_dim, c.mla.v_head_dim,
        c.mla.latent_dim());
  fmt::print("parameters: {} ({:.3f}B)\n", c.num_parameters(), params / 1e9);
  if (c.moe.enabled())
    fmt::print("active parameters per token: {} ({:.3f}B; {} experts of width {}, top {}{})\n",
               c.num_active_parameters(), double(c.num_active_parameters()) / 1e9, c.moe.num_experts,
               c.moe.expert_intermediate, c.moe.routing.top_k,
               c.moe.shared_intermediate > 0 ? fmt::format(", shared expert of width {}", c.moe.shared_intermediate)
                                             : std::string());
  fmt::print("memory plan:\n");
  fmt::print("  weights bf16: {}\n  weights f32:  {}\n", gib(params * 2), gib(params * 4));
  fmt::print("  kv cache per token: {} bytes bf16, {} bytes fp8 (--kv-cache-dtype fp8), {} bytes f32\n",
             int64_t(kv_elems_per_token * 2), int64_t(kv_elems_per_token), int64_t(kv_elems_per_token * 4));
  if (c.max_position_embeddings > 0)
    fmt::print("  kv cache for one full context ({} tokens): {} bf16, {} fp8\n", c.max_position_embeddings,
               gib(kv_elems_per_token * 2 * c.max_position_embeddings),
               gib(kv_elems_per_token * c.max_position_embeddings));
}

void run_info(const InfoOptions& o) {
  if (!o.vllm_flags.empty()) {
    fmt::print("{}\n", o.vllm_flags == "json" ? vllm_flag_table_json() : vllm_flag_table_markdown());
    return;
  }
  if (o.presets) {
    for (const auto& p : list_presets()) fmt::print("{:<14} {}\n", p.name, p.description);
    return;
  }
  if (o.quantizations) {
    for (const auto& s : supported_quant_schemes()) fmt::print("{}\n", s);
    return;
  }
  GS_CHECK(o.model.empty() != o.preset.empty(),
           "info: pass exactly one of --model DIR, --preset NAME, --presets or --quantizations");
  ModelSource src;
  src.dir = o.model;
  src.dummy = !o.preset.empty();
  src.preset = o.preset;
  const ModelConfig cfg = resolve_model_config(src);
  print_config(cfg, o.model.empty() ? "preset " + o.preset : o.model);
  print_memory_plan(cfg);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print a model's config, parameter count and memory plan, or the presets");
  auto opts = std::make_shared<InfoOptions>();
  cmd->add_flag("--presets", opts->presets, "list the built-in dummy presets");
  cmd->add_flag("--quantizations", opts->quantizations, "list the supported quantization schemes (FP8)");
  cmd->add_option("--vllm-flags", opts->vllm_flags,
                  "print the vLLM serve flags graphserve accepts without a setting of its own (md or json)")
      ->check(CLI::IsMember({"md", "json"}));
  cmd->add_option("--model", opts->model, "Hugging Face model directory");
  cmd->add_option("--preset", opts->preset, "built-in preset name (see --presets)");
  cmd->callback([opts] { run_info(*opts); });
}

}  // namespace gs
