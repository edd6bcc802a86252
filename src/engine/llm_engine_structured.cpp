// Structured output in the engine: the grammar compiler for the model's vocabulary and each
// step's bitmasks (engine/llm_engine.h, LLMEngine::compile_constraint).
//
// Each constrained request holds a GrammarMatcher that takes every token it samples. Before a
// step, the engine thread computes the masks of the rows the step samples (the adaptive cache
// keeps that to the tokens whose fate depends on the stack); the runner copies them into the
// sampler's persistent bitmask buffer with the other per-row inputs, so a constrained row
// replays the same FULL graph as a free one. Constrained requests do not speculate.
#include "core/error.h"
#include "engine/llm_engine_impl.h"
#include "structured/constraint_error.h"

namespace gs {

structured::GrammarCompiler& LLMEngine::Impl::grammar_compiler() {
  std::lock_guard lock(grammar_mu);
  if (!grammar_compiler_) {
    std::vector<int32_t> ends(eos_ids.begin(), eos_ids.end());
    auto vocab = std::make_shared<const structured::TokenVocab>(tok, exec->model_config().vocab_size, std::move(ends));
    grammar_compiler_ = std::make_unique<structured::GrammarCompiler>(std::move(vocab));
  }
  return *grammar_compiler_;
}

void LLMEngine::Impl::fill_bitmasks(SchedulerOutput& batch) {
  for (auto& s : batch.requests) {
    if (!s.sample) continue;
    if (auto it = requests.find(s.id); it != requests.end()) s.bitmask = it->second->next_bitmask();
  }
}

std::shared_ptr<const structured::CompiledGrammar> LLMEngine::compile_constraint(
    const structured::ConstraintSpec& spec) const {
  if (uses_worker_processes(impl_->cfg))
    throw structured::ConstraintError(
        "structured output is not supported with worker processes (--tensor-parallel-size > 1 or "
        "--distributed-executor-backend mp) yet");
  return impl_->grammar_compiler().compile(spec);
}

}  // namespace gs
