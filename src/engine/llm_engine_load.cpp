// LLMEngine over the real ModelRunner (and a draft model's, with speculative decoding), with the
// tokenizer that goes with the model.
#include <filesystem>

#include "core/error.h"
#include "core/logging.h"
#include "engine/generation_config.h"
#include "engine/llm_engine_impl.h"

namespace gs {
namespace {

Tokenizer load_tokenizer(const EngineConfig& cfg, const ModelConfig& model) {
  namespace fs = std::filesystem;
  if (!cfg.tokenizer.empty()) return Tokenizer::from_dir(cfg.tokenizer);
  if (!cfg.model.empty() && fs::exists(fs::path(cfg.model) / "tokenizer.json")) return Tokenizer::from_dir(cfg.model);
  // A real checkpoint without its tokenizer would silently produce garbage text.
  GS_CHECK(cfg.model.empty() || cfg.load_format == "dummy" || cfg.skip_tokenizer_init,
           "{}: no tokenizer.json; give --tokenizer DIR, or --skip-tokenizer-init to use the byte-level "
           "tokenizer (for token-id prompts)",
           cfg.model);
  spdlog::info("no tokenizer.json: using the built-in byte-level tokenizer");
  return Tokenizer::byte_level(model.vocab_size);
}

}  // namespace

LLMEngine::LLMEngine(const EngineConfig& cfg) {
  cfg.validate();
  const SamplingParams defaults = load_sampling_defaults(cfg.generation_config, cfg.model);
  // The draft first: on a GPU the target's KV cache takes what the draft leaves.
  auto draft = cfg.speculative.method == "draft_model" ? std::make_unique<DraftProposer>(cfg) : nullptr;
  auto exec = make_executor(cfg);
  Tokenizer tok = load_tokenizer(cfg, exec->model_config());
  impl_ = std::make_unique<Impl>(cfg, std::move(exec), tok, std::move(draft));
  impl_->sampling_defaults = defaults;
}

}  // namespace gs
