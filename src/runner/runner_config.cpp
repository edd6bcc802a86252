// Implements runner/runner_config.h (RunnerConfig).
#include "runner/runner_config.h"

#include "core/error.h"

namespace gs {

void RunnerConfig::validate() const {
  GS_CHECK(load_format == "auto" || load_format == "safetensors" || load_format == "dummy",
           "--load-format must be one of auto, safetensors, dummy; got '{}'", load_format);
  GS_CHECK(device == "auto" || device == "cpu" || device == "cuda" || device.rfind("cuda:", 0) == 0,
           "--device must be one of auto, cpu, cuda; got '{}'", device);
  GS_CHECK(dtype == "auto" || dtype == "float32" || dtype == "bfloat16" || dtype == "float16",
           "--dtype must be one of auto, float32, bfloat16, float16; got '{}'", dtype);
  GS_CHECK(quantization.empty() || quantization == "fp8" || quantization == "none",
           "--quantization '{}' is not supported (only fp8; FP8 checkpoints are detected from config.json, "
           "see graphserve info --quantizations)",
           quantization);
  GS_CHECK(kv_cache_dtype != "fp8_e5m2",
           "--kv-cache-dtype fp8_e5m2 is not supported: the FP8 KV cache is e4m3 (--kv-cache-dtype fp8 or fp8_e4m3)");
  GS_CHECK(kv_cache_dtype == "auto" || kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3",
           "--kv-cache-dtype must be one of auto, fp8, fp8_e4m3; got '{}'", kv_cache_dtype);
  GS_CHECK(max_num_seqs >= 1, "--max-num-seqs must be >= 1, got {}", max_num_seqs);
  GS_CHECK(max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got {}", max_num_batched_tokens);
  GS_CHECK(max_model_len >= 0, "--max-model-len must be >= 1 (or 0 for the model's), got {}", max_model_len);
  GS_CHECK(block_size >= 1 && block_size <= 1024, "--block-size must be in [1, 1024], got {}", block_size);
  GS_CHECK(gpu_memory_utilization > 0.0f && gpu_memory_utilization <= 1.0f,
           "--gpu-memory-utilization must be in (0, 1], got {}", gpu_memory_utilization);
  GS_CHECK(max_loras >= 1, "--max-loras must be >= 1, got {}", max_loras);
  GS_CHECK(max_lora_rank >= 1 && max_lora_rank <= 512, "--max-lora-rank must be in [1, 512], got {}", max_lora_rank);
  GS_CHECK(max_cpu_loras >= 0, "--max-cpu-loras must be >= 0, got {}", max_cpu_loras);
  GS_CHECK(enable_lora || lora_modules.empty(), "--lora-modules needs --enable-lora");
  GS_CHECK(lora_host_capacity() >= max_loras, "--max-cpu-loras ({}) must be >= --max-loras ({})", lora_host_capacity(),
           max_loras);
  for (size_t i = 0; i < lora_modules.size(); ++i) {
    GS_CHECK(!lora_modules[i].first.empty(), "--lora-modules: an adapter has an empty name (use name=path)");
    for (size_t j = 0; j < i; ++j)
      GS_CHECK(lora_modules[j].first != lora_modules[i].first, "--lora-modules: adapter name '{}' is given twice",
               lora_modules[i].first);
  }
  speculative.validate();
  GS_CHECK(tensor_parallel_size >= 1, "--tensor-parallel-size must be >= 1, got {}", tensor_parallel_size);
  GS_CHECK(tp_rank >= 0 && tp_rank < tensor_parallel_size, "tensor-parallel rank {} outside [0, {})", tp_rank,
           tensor_parallel_size);
}

}  // namespace gs
