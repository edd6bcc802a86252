// LLMEngine over the real ModelRunner (and a draft model's, with speculative decoding), with the
// tokenizer that goes with the model.
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/logging.h"
#include "engine/generation_config.h"
#include "engine/llm_engine_impl.h"

namespace gs {
namespace {

// The model's tokenizer, read before the weights so that a tokenizer problem is reported at
// once; nullopt when the model has none (the built-in one, which needs the vocabulary size).
std::optional<Tokenizer> load_tokenizer_file(const EngineConfig& cfg) {
  namespace fs = std::filesystem;
  if (!cfg.tokenizer.empty()) return Tokenizer::from_dir(cfg.tokenizer);
  if (!cfg.model.empty() && fs::exists(fs::path(cfg.model) / "tokenizer.json")) return Tokenizer::from_dir(cfg.model);
  // A real checkpoint without its tokenizer would silently produce garbage text.
  GS_CHECK(cfg.model.empty() || cfg.load_format == "dummy" || cfg.skip_tokenizer_init,
           "{}: no tokenizer.json; give --tokenizer DIR, or --skip-tokenizer-init to use the byte-level "
           "tokenizer (for token-id prompts)",
           cfg.model);
  return std::nullopt;
}

Tokenizer builtin_tokenizer(const EngineConfig& cfg, const ModelConfig& model) {
  if (cfg.model.empty() || cfg.load_format == "dummy") {
    // Random weights: pseudo-words for every id, so their output is visible text.
    spdlog::info("no tokenizer.json: using the built-in dummy tokenizer (bytes, then one pseudo-word per id)");
    return Tokenizer::dummy(model.vocab_size);
  }
  spdlog::info("no tokenizer.json: using the built-in byte-level tokenizer");
  return Tokenizer::byte_level(model.vocab_size);
}

}  // namespace

LLMEngine::LLMEngine(const EngineConfig& cfg) {
  cfg.validate();
  const SamplingParams defaults = load_sampling_defaults(cfg.generation_config, cfg.model);
  std::optional<Tokenizer> file_tok = load_tokenizer_file(cfg);
  // The draft first: on a GPU the target's KV cache takes what the draft leaves.
  auto draft = cfg.speculative.method == "draft_model" ? std::make_unique<DraftProposer>(cfg) : nullptr;
  auto exec = make_executor(cfg);
  Tokenizer tok = file_tok ? *file_tok : builtin_tokenizer(cfg, exec->model_config());
  impl_ = std::make_unique<Impl>(cfg, std::move(exec), tok, std::move(draft));
  impl_->sampling_defaults = defaults;
}

}  // namespace gs
