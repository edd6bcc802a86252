// LLMEngine::Impl: the engine's state, shared by the llm_engine*.cpp files: llm_engine.cpp (request
// lifecycle, steps), llm_engine_load.cpp (building the real runner and tokenizer),
// llm_engine_speculation.cpp, llm_engine_step_isolation.cpp and llm_engine_structured.cpp.
#pragma once
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/draft_proposer.h"
#include "engine/engine_request.h"
#include "engine/llm_engine.h"
#include "engine/lora_cache.h"
#include "engine/scheduler.h"
#include "executor/executor.h"
#include "kv/block_pool.h"
#include "spec/ngram_proposer.h"
#include "structured/grammar_compiler.h"
#include "tokenizer/tokenizer.h"

namespace gs {

struct LLMEngine::Impl {
  Impl(const EngineConfig& cfg, std::unique_ptr<Executor> exec, const Tokenizer& tok,
       std::unique_ptr<DraftProposer> draft = nullptr);

  // Validates and queues a request; `lora` ("": the base model) is made held from `lora_image`
  // or its directory (LoraCache::acquire).
  RequestId add(std::vector<int32_t> prompt, const SamplingParams& params, const std::string& lora = "",
                std::shared_ptr<const LoraSlotImage> lora_image = nullptr);
  std::set<int> loras_in_use() const;  // the adapter ids of live requests
  // Drops from host memory the removed adapters no request uses, then those beyond --max-cpu-loras.
  void collect_loras();
  std::vector<RequestOutput> step();
  void abort(RequestId id);
  // Records one sampled token of `s`; finishes the request when that ends it.
  void take_token(const ScheduledRequest& s, const SampledToken& t, double now, std::vector<RequestOutput>& outs);
  // Records the tokens a step gave `s` (one, or the accepted proposals and the token after them):
  // rolls back the rejected proposals, then takes tokens until one ends the request.
  void take_tokens(const ScheduledRequest& s, std::span<const SampledToken> tokens, double now,
                   std::vector<RequestOutput>& outs);
  // Builds the proposer of cfg.speculative (llm_engine_speculation.cpp).
  void init_speculation();
  // Fills the proposals of every running request in decode (speculative decoding).
  void propose();
  // After the executor threw on `batch`: runs each request alone. Those that fail again are
  // aborted with the error (RequestOutput::error); the others take their step (llm_engine_step_isolation.cpp).
  void run_alone(const SchedulerOutput& batch, const std::string& error, std::vector<RequestOutput>& outs);
  // Points each constrained sampled row of `batch` at its request's bitmask for this step
  // (llm_engine_structured.cpp).
  void fill_bitmasks(SchedulerOutput& batch);
  // The compiler for this model's vocabulary, built on first use (thread-safe).
  structured::GrammarCompiler& grammar_compiler();

  EngineConfig cfg;
  std::unique_ptr<Executor> exec;
  Tokenizer tok;
  BlockPool pool;
  Scheduler sched;
  int max_model_len = 0;
  bool max_model_len_from_kv = false;  // lowered to what the KV cache holds
  std::vector<int> eos_ids;
  SamplingParams sampling_defaults;  // from cfg.generation_config (loaded with the real runner)
  uint64_t request_counter = 0;
  std::unordered_map<RequestId, std::unique_ptr<EngineRequest>> requests;
  std::vector<RequestOutput> pending;  // aborted requests' outputs, returned by the next step
  LoraCache loras;                     // the served adapters and those in host memory
  uint64_t prompt_tokens = 0;          // prompt tokens computed, recomputation after preemption included
  uint64_t generation_tokens = 0;
  uint64_t non_finite_logits = 0;        // sampled rows whose logits held NaN or infinity
  std::unique_ptr<NgramProposer> ngram;  // --speculative-config method ngram
  std::unique_ptr<DraftProposer> draft;  // method draft_model (built by the real engine's loader)
  SpecDecodeStats spec_stats;
  std::mutex grammar_mu;  // guards the creation of grammar_compiler_
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler_;
};

}  // namespace gs
