// The Hugging Face greedy goldens of stories260K (../shared/golden/stories260K) and the engine
// config the stories260K engine tests share: a KV cache so small that the 8 golden prompts
// together force preemption, and a token budget that chunks the longest prefill.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/engine_config.h"
#include "golden.h"
#include "test_paths.h"

namespace gs::test {

struct Golden {
  std::string name, prompt, full_text;
  std::vector<int32_t> input_ids, output_ids;
};

inline std::vector<Golden> load_stories_goldens() {
  std::vector<Golden> out;
  for (const char* n : {"short", "long", "bos_only", "digits", "emoji", "non_ascii", "punctuation", "sentence"}) {
    const auto j = stories_golden(n);
    out.push_back({n, j["prompt"], j["full_text"], j["input_ids"].get<std::vector<int32_t>>(),
                   j["greedy_output_ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

inline EngineConfig stories_config() {
  EngineConfig cfg;
  cfg.model = stories260k_dir().string();
  cfg.device = "cpu";
  cfg.enforce_eager = true;
  cfg.max_num_seqs = 5;
  cfg.max_num_batched_tokens = 48;  // the 104-token prompt is prefilled in chunks
  cfg.block_size = 16;
  // 14 blocks of 16 tokens (5 layers x 4 kv heads x 8 dims x K,V x fp32 = 1280 bytes/token):
  // far less than the 8 requests need together, so the scheduler must preempt.
  cfg.kv_cache_memory_bytes = 1280 * 16 * 14;
  return cfg;
}

}  // namespace gs::test
