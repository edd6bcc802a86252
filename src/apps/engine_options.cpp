// The engine flags shared by generate, serve and the benchmarks.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/vllm_flags.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/byte_size.h"

namespace gs {
namespace {

// -O levels as presets of the graph mode (vLLM's -O0..-O3).
void apply_level(CompilationConfig& cc, int level) {
  GS_CHECK(level >= 0 && level <= 3, "-O must be 0, 1, 2 or 3, got {}", level);
  static constexpr const char* kModes[] = {"NONE", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL_AND_PIECEWISE"};
  cc.apply_setting("cudagraph_mode", kModes[level]);
}

// "-cc.KEY=VALUE" (or "--cc.KEY=VALUE"): CLI11 cannot declare such flags, so they arrive as
// extras of the subcommand.
void apply_cc_extras(CLI::App& cmd, CompilationConfig& cc) {
  for (const std::string& arg : cmd.remaining()) {
    std::string s = arg;
    if (s.rfind("--cc.", 0) == 0) s.erase(0, 1);
    if (s.rfind("-cc.", 0) != 0) {
      const std::string close = suggest_flag(cmd, arg);
      fail("unknown argument '{}'{} (see graphserve {} --help)", arg,
           close.empty() ? "" : fmt::format(": did you mean {}?", close), cmd.get_name());
    }
    s.erase(0, 4);
    const auto eq = s.find('=');
    GS_CHECK(eq != std::string::npos && eq > 0, "'{}': write -cc.KEY=VALUE, e.g. -cc.cudagraph_mode=FULL", arg);
    cc.apply_setting(s.substr(0, eq), s.substr(eq + 1));
  }
}

// vLLM's --dtype spellings: half = float16, float = float32.
std::string canonical_dtype(const std::string& v) {
  if (v == "half") return "float16";
  if (v == "float") return "float32";
  return v;
}

int int_flag(long long v, const char* flag) {
  GS_CHECK(v >= 0 && v <= (1LL << 31) - 1, "{} {} is out of range", flag, v);
  return static_cast<int>(v);
}

// vLLM's --runner / --convert / --task (older) and --pooler-config: generation or pooling
// (embeddings). "auto" is resolved by finish_engine_options from the model's architecture.
void add_runner_options(CLI::App& cmd, EngineConfig& cfg) {
  cmd.add_option_function<std::string>(
      "--runner",
      [&cfg](const std::string& v) {
        GS_CHECK(v == "auto" || v == "generate" || v == "pooling",
                 "--runner {}: graphserve runs auto, generate or pooling (embedding) models", v);
        cfg.runner = v;
      },
      "generate (text) | pooling (embeddings, /v1/embeddings) | auto (from the architecture)");
  cmd.add_option_function<std::string>(
      "--convert",
      [&cfg](const std::string& v) {
        GS_CHECK(v == "auto" || v == "none" || v == "embed",
                 "--convert {}: only embed is supported (a causal LM served as an embedding model)", v);
        if (v == "embed") cfg.runner = "pooling";
      },
      "embed: serve a causal LM as an embedding model (--runner pooling)");
  cmd.add_option_function<std::string>(
      "--task",
      [&cfg](const std::string& v) {
        GS_CHECK(v == "auto" || v == "generate" || v == "embed" || v == "embedding",
                 "--task {}: supported tasks are generate and embed", v);
        if (v == "embed" || v == "embedding") cfg.runner = "pooling";
      },
      "older spelling of --runner: generate | embed");
  for (const char* name : {"--pooler-config", "--override-pooler-config"})
    cmd.add_option_function<std::string>(
        name,
        [&cfg, name](const std::string& v) {
          const auto j = nlohmann::json::parse(v, nullptr, false);
          GS_CHECK(j.is_object(), "{}: '{}' is not a JSON object", name, v);
          for (const auto& [key, value] : j.items()) {
            if (key == "pooling_type" && value.is_string()) {
              std::string t = value.get<std::string>();
              for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
              GS_CHECK(t == "last" || t == "mean", "{}: pooling_type {} is not supported (LAST or MEAN)", name, t);
              cfg.pooling_type = t;
            } else {
              GS_CHECK(key == "normalize" && value == true,
                       "{}: '{}' is not supported (pooling_type and "
                       "normalize: true are)",
                       name, key);
            }
          }
        },
        "JSON: {\"pooling_type\": \"LAST\" | \"MEAN\"} (embeddings are always L2-normalised)");
}

// --runner auto: a checkpoint whose architecture is a bare model ("Qwen3Model", "MistralModel":
// no LM head) is an embedding model, as vLLM decides.
void resolve_runner(EngineConfig& cfg) {
  if (cfg.runner == "auto") {
    cfg.runner = "generate";
    const std::filesystem::path config = std::filesystem::path(cfg.model) / "config.json";
    std::ifstream in(config);
    const auto j = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
    if (j.is_object() && j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0].is_string()) {
      const std::string arch = j["architectures"][0];
      if (arch.size() > 5 && arch.compare(arch.size() - 5, 5, "Model") == 0) cfg.runner = "pooling";
    }
  }
  if (cfg.runner != "pooling") return;
  GS_CHECK(cfg.tensor_parallel_size == 1,
           "--runner pooling with --tensor-parallel-size {} is not supported yet; use --tensor-parallel-size 1",
           cfg.tensor_parallel_size);
  GS_CHECK(!cfg.speculative.enabled(), "--runner pooling: speculative decoding does not apply to embedding models");
}

}  // namespace

void add_engine_options(CLI::App& cmd, EngineConfig& cfg, std::vector<std::string>* served_names) {
  cmd.add_option("--model", cfg.model, "Hugging Face model directory (default: the dummy --preset)");
  cmd.add_option("--load-format", cfg.load_format, "auto | safetensors | dummy")->capture_default_str();
  cmd.add_option("--preset", cfg.preset, "model shape for dummy weights (graphserve info --presets)")
      ->capture_default_str();
  cmd.add_option("--tokenizer", cfg.tokenizer, "tokenizer directory (default: the model's)");
  cmd.add_flag("--skip-tokenizer-init", cfg.skip_tokenizer_init,
               "serve a model without tokenizer.json with the byte-level tokenizer (token-id prompts)");
  if (served_names) {
    cmd.add_option_function<std::vector<std::string>>(
           "--served-model-name",
           [&cfg, served_names](const std::vector<std::string>& v) {
             *served_names = v;
             cfg.served_model_name = v.front();
           },
           "model names clients may use; the first is the one responses carry")
        ->expected(1, -1);
  } else {
    cmd.add_option("--served-model-name", cfg.served_model_name, "model name clients use");
  }
  cmd.add_option("--device", cfg.device, "auto | cpu | cuda")->capture_default_str();
  cmd.add_option_function<std::string>(
         "--dtype", [&cfg](const std::string& v) { cfg.dtype = canonical_dtype(v); },
         "auto | bfloat16 | float16 (half) | float32 (float)")
      ->default_str(cfg.dtype);
  cmd.add_option("--quantization,-q", cfg.quantization,
                 "fp8: quantize a float checkpoint's projections, and a mixture of experts' routed experts, to FP8 "
                 "at load (FP8 checkpoints are detected from config.json; graphserve info --quantizations)");
  cmd.add_option("--kv-cache-dtype", cfg.kv_cache_dtype, "auto (the compute dtype) | fp8 | fp8_e4m3")
      ->capture_default_str();
  cmd.add_option("--seed", cfg.seed, "seed of dummy weights and of requests without their own seed")
      ->capture_default_str();
  cmd.add_option("--generation-config", cfg.generation_config,
                 "default sampling parameters: auto (the model's generation_config.json), vllm (none), or a "
                 "directory holding a generation_config.json")
      ->capture_default_str();
  cmd.add_option("--max-num-seqs", cfg.max_num_seqs, "most requests in one step")->capture_default_str();
  cmd.add_option_function<std::string>(
         "--max-num-batched-tokens",
         [&cfg](const std::string& v) {
           cfg.max_num_batched_tokens =
               int_flag(parse_human_int(v, "--max-num-batched-tokens"), "--max-num-batched-tokens");
         },
         "most tokens in one step (2048, 8k = 8000, 8K = 8192)")
      ->default_str(std::to_string(cfg.max_num_batched_tokens));
  cmd.add_option_function<std::string>(
         "--max-model-len",
         [&cfg](const std::string& v) {
           cfg.max_model_len =
               v == "auto" || v == "-1" ? 0 : int_flag(parse_human_int(v, "--max-model-len"), "--max-model-len");
         },
         "context length: 4096, 32k (32000), 32K (32768); 0, -1 or auto: the model's")
      ->default_str("auto");
  cmd.add_option("--block-size", cfg.block_size, "tokens per KV cache block")->capture_default_str();
  cmd.add_option("--gpu-memory-utilization", cfg.gpu_memory_utilization,
                 "fraction of GPU memory to use (weights, activations, KV cache)")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
      "--kv-cache-memory,--kv-cache-memory-bytes",
      [&cfg](const std::string& v) { cfg.kv_cache_memory_bytes = parse_byte_size(v, "--kv-cache-memory"); },
      "KV cache size in bytes; suffixes K, M, G (powers of 1024), e.g. 512MiB");
  cmd.add_option("--tensor-parallel-size", cfg.tensor_parallel_size,
                 "GPUs to shard the model over (one worker process each); -tp N too")
      ->capture_default_str();
  cmd.add_flag("--enable-expert-parallel,!--no-enable-expert-parallel", cfg.enable_expert_parallel,
               "mixture-of-experts models: each tensor-parallel rank holds whole routed experts (a contiguous range) "
               "instead of a share of every expert's width; attention and shared experts stay sharded; -ep too");
  cmd.add_option("--distributed-executor-backend", cfg.distributed_executor_backend,
                 "where the model runs: uni (this process, one GPU) or mp (one worker process per GPU); default uni "
                 "for one GPU, mp for more")
      ->check(CLI::IsMember({"uni", "mp"}));
  cmd.add_flag("--disable-custom-all-reduce", cfg.disable_custom_all_reduce,
               "NCCL for every all-reduce size (no custom all-reduce over NVLink peer memory)");
  cmd.add_flag("--all-reduce-in-projection", cfg.kernel_options.all_reduce.in_projection,
               "tensor parallelism at one token: o_proj / down sum the ranks' partial outputs themselves over the "
               "custom all-reduce's peer memory (no all-reduce kernel after them); not yet measured on two GPUs "
               "(docs/PERF.md)");
  cmd.add_option("--nnodes", cfg.nnodes, "hosts the tensor-parallel ranks span (others run graphserve worker)")
      ->capture_default_str();
  cmd.add_option("--node-rank", cfg.node_rank, "this host's index (serve / generate run on node 0)")
      ->capture_default_str();
  cmd.add_option("--master-addr", cfg.master_addr, "address of node 0, where workers connect")->capture_default_str();
  cmd.add_option("--master-port", cfg.master_port, "port of node 0 for workers (0: any free port, one node only)")
      ->capture_default_str();
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", cfg.enable_prefix_caching,
               "reuse the KV cache of common prompt prefixes (default: on)");
  cmd.add_flag("--enforce-eager", cfg.enforce_eager, "no CUDA graphs (cudagraph_mode NONE)");
  cmd.add_flag("--disable-cascade-attn", cfg.disable_cascade_attn,
               "never run a batch's shared prompt prefix once for all its requests (cascade attention)");
  cmd.add_option("--persistent-decode-max-tokens", cfg.kernel_options.decode.persistent_max_tokens,
                 "decode steps of at most this many requests (at most 4) run as one persistent kernel (dense bf16 "
                 "Llama-family models on the GPU, FULL graphs); 0: never (the default: slower than the layered path "
                 "so far, docs/PERF.md)")
      ->check(CLI::Range(0, 4))
      ->capture_default_str();
  cmd.add_option("--moe-dense-max-tokens", cfg.kernel_options.moe.dense_max_tokens,
                 "MoE batches of at most this many tokens, where each expert gets enough of them, run every expert "
                 "on every token as cuBLASLt GEMMs (bf16 on the GPU); 0: the grouped GEMMs over the selected experts "
                 "only")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--moe-dense-min-pairs-per-expert", cfg.kernel_options.moe.dense_min_pairs_per_expert,
                 "... and where (tokens x experts a token) / experts is at least this")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--moe-dense-max-work-ratio", cfg.kernel_options.moe.dense_max_work_ratio,
                 "... and where experts / experts a token is at most this")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_runner_options(cmd, cfg);
  cmd.add_flag("--enable-lora", cfg.enable_lora, "serve LoRA adapters (--lora-modules), chosen per request by 'model'");
  cmd.add_option_function<std::vector<std::string>>(
         "--lora-modules",
         [&cfg](const std::vector<std::string>& v) {
           for (const std::string& m : v) {
             const auto eq = m.find('=');
             GS_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < m.size(),
                      "--lora-modules: '{}' must be name=path (a PEFT adapter directory)", m);
             cfg.lora_modules.emplace_back(m.substr(0, eq), m.substr(eq + 1));
           }
         },
         "LoRA adapters as name=path ... (PEFT directories)")
      ->expected(1, -1);
  cmd.add_option("--max-loras", cfg.max_loras, "most adapters in one batch (device slots)")->capture_default_str();
  cmd.add_option("--max-lora-rank", cfg.max_lora_rank, "largest adapter rank")->capture_default_str();
  cmd.add_option("--max-cpu-loras", cfg.max_cpu_loras,
                 "LRU capacity of adapters in host memory; the others are read when named (0: --max-loras)")
      ->capture_default_str();
  cmd.add_option_function<int>(
      "-O", [&cfg](int level) { apply_level(cfg.compilation, level); },
      "graph preset: 0 NONE, 1 PIECEWISE, 2 and 3 FULL_AND_PIECEWISE");
  cmd.add_option_function<std::string>(
      "--compilation-config", [&cfg](const std::string& j) { cfg.compilation.apply_json(j); },
      "JSON, e.g. '{\"cudagraph_mode\": \"PIECEWISE\", \"cudagraph_capture_sizes\": [1, 2, 4]}'; "
      "single settings as -cc.KEY=VALUE");
  cmd.add_option_function<std::string>(
      "--speculative-config", [&cfg](const std::string& j) { cfg.speculative = SpeculativeConfig::parse(j); },
      "speculative decoding, JSON as vLLM: '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
      "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}'");
  cmd.allow_extras();
  // Runs after the option callbacks above, so -cc.* settings override -O and the JSON.
  cmd.parse_complete_callback([&cmd, &cfg] { apply_cc_extras(cmd, cfg.compilation); });
}

void finish_engine_options(EngineConfig& cfg) {
  resolve_runner(cfg);
  cfg.validate();
}

}  // namespace gs
