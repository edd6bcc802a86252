// The engine on random tiny weights with Qwen2.5's 151,665-token vocabulary (preset
// tiny-qwen2-151k, CPU): structured-output tests need a real tokenizer's vocabulary, not the
// weights behind it.
#pragma once
#include "executor/engine_config.h"
#include "test_paths.h"

namespace gs::test {

inline EngineConfig qwen_vocab_config() {
  EngineConfig cfg;
  cfg.load_format = "dummy";
  cfg.preset = "tiny-qwen2-151k";
  cfg.tokenizer = (golden_dir() / "tokenizers" / "qwen2.5-instruct").string();
  cfg.device = "cpu";
  cfg.enforce_eager = true;
  cfg.max_num_seqs = 64;
  cfg.max_model_len = 1024;
  cfg.kv_cache_memory_bytes = 64u << 20;
  return cfg;
}

}  // namespace gs::test
