// A server over the real engine with stories260K on the CPU (eager: starts in a blink),
// shared by the end-to-end tests of one executable.
#pragma once
#include <memory>

#include "engine/llm_engine.h"
#include "server/api_server.h"
#include "server/engine_loop.h"
#include "test_paths.h"

namespace gs::test {

inline EngineConfig stories_config() {
  EngineConfig cfg;
  cfg.model = stories260k_dir().string();
  cfg.device = "cpu";
  cfg.enforce_eager = true;
  cfg.max_num_seqs = 64;
  cfg.kv_cache_memory_bytes = 32u << 20;
  return cfg;
}

// A tiny template so chat can be tested on a model that has none.
inline const char* kTestChatTemplate =
    "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

struct RealServer {
  explicit RealServer(const EngineConfig& model = stories_config())
      : engine(std::make_unique<LLMEngine>(model), kTestChatTemplate) {
    ServerConfig cfg;
    cfg.port = 0;
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
  }
  int port() const { return server->port(); }
  EngineLoop engine;
  std::unique_ptr<ApiServer> server;
};

// Runs `prompt` through a fresh engine of `cfg` offline, with the LoRA adapter `lora` ("" the
// base model); returns the generated text.
inline std::string offline_text(const EngineConfig& cfg, const std::string& prompt, const SamplingParams& p,
                                const std::string& lora = "") {
  LLMEngine engine(cfg);
  engine.add_request(engine.tokenizer().encode(prompt, true), p, lora);
  std::string text;
  while (engine.has_unfinished_requests())
    for (const RequestOutput& o : engine.step()) text += o.new_text;
  return text;
}

inline std::string offline_text(const std::string& prompt, const SamplingParams& p) {
  return offline_text(stories_config(), prompt, p);
}

}  // namespace gs::test
