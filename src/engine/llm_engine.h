// LLMEngine: requests in, tokens and text out, one scheduler step at a time.
//
// Not thread-safe: one thread drives step(). The server wraps it in its own thread.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/engine_config.h"
#include "runner/model_runner.h"
#include "types/scheduler_output.h"
#include "types/token_logprob.h"

namespace gs::structured {
struct ConstraintSpec;
}

namespace gs {

class Tokenizer;
class Executor;
struct ModelConfig;

enum class FinishReason { None, Stop, Length, Abort };
std::string_view finish_reason_name(FinishReason r);  // "", "stop", "length", "abort"

// What one step produced for one request.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_token_ids;  // tokens generated this step (usually one)
  std::string new_text;                // newly final text (stop strings removed)
  std::vector<TokenLogprob> logprobs;  // per new token, when requested
  // With the first token, when requested: prompt tokens 1 .. n-1 (the first has no logprob).
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string stop_reason;  // the stop string or token that ended it, if any
  std::string error;        // why an aborted request failed (its step threw, or its logits were not finite)
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;
  double arrival_time = 0.0;      // seconds (steady clock)
  double scheduled_time = 0.0;    // when first scheduled (0 until then): arrival..this is queueing
  double first_token_time = 0.0;  // 0 until the first token
  // A pooling request's result (SamplingParams::pooling): its L2-normalised embedding, given
  // once, with finished set and no token.
  std::vector<float> embedding;
};

// Speculative decoding counters (vLLM's vllm:spec_decode_*): drafts are requests' proposal runs
// verified, draft tokens the proposed tokens verified, accepted those that were sampled.
struct SpecDecodeStats {
  uint64_t num_drafts = 0;
  uint64_t num_draft_tokens = 0;
  uint64_t num_accepted_tokens = 0;
  uint64_t num_emitted_tokens = 0;         // tokens verification steps emitted (accepted + one per draft)
  std::vector<uint64_t> accepted_per_pos;  // [k]: drafts whose proposal at this position was accepted
  double proposal_seconds = 0.0;           // host time spent proposing (n-gram lookup or the draft model's steps)
  uint64_t proposal_steps = 0;             // engine steps that proposed
  RunnerStats draft;                       // the draft model's runner (draft_model only)

  // Mean tokens emitted per verified draft (1 + accepted / drafts); 0 without drafts.
  double mean_accepted_length() const {
    return num_drafts ? 1.0 + double(num_accepted_tokens) / double(num_drafts) : 0.0;
  }
  double acceptance_rate() const {
    return num_draft_tokens ? double(num_accepted_tokens) / double(num_draft_tokens) : 0.0;
  }
  // One line: drafts, tokens, acceptance rate, mean acceptance length, per-position rates.
  std::string summary() const;
};

// Counters for logs and metrics.
struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  int num_preemptions = 0;
  uint64_t prefix_cache_query_tokens = 0;  // tokens of requests that looked up the prefix cache
  uint64_t prefix_cache_hit_tokens = 0;    // of those, tokens taken from cached blocks
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;
  uint64_t prompt_tokens = 0;
  uint64_t generation_tokens = 0;
  // Sampled rows whose logits held NaN or +inf, or were -inf for every token without a grammar's
  // mask: each failed its request (RequestOutput::error), and only that one.
  uint64_t non_finite_logits = 0;
  RunnerStats graphs;  // forward steps per runtime mode, padding, captures (from the runner)
  SpecDecodeStats spec;
  std::vector<double> rank_step_seconds;  // tensor parallelism: each rank's last step
  std::string fatal_error;                // non-empty: the engine cannot run (a worker died or hung)
};

class LLMEngine {
 public:
  // Builds the ModelRunner (model, KV cache, graphs) and the tokenizer: cfg.tokenizer, else
  // the model directory's tokenizer.json, else the built-in byte-level one.
  explicit LLMEngine(const EngineConfig& cfg);
  // An engine over any executor (tests drive the scheduler with a fake model).
  LLMEngine(const EngineConfig& cfg, std::unique_ptr<Executor> executor, const Tokenizer& tok);
  ~LLMEngine();
  LLMEngine(const LLMEngine&) = delete;
  LLMEngine& operator=(const LLMEngine&) = delete;

  // Validates and queues a request; throws gs::Error (empty prompt, prompt longer than the
  // context, invalid sampling values). Returns its id.
  // Context rule (as vLLM): the prompt must be shorter than max_model_len; generation then
  // stops with finish_reason Length at max_tokens or when prompt + output reaches
  // max_model_len, whichever comes first (max_tokens is not an error when it does not fit).
  RequestId add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params);
  RequestId add_request(const std::string& prompt, const SamplingParams& params);
  // The same, generated with a served LoRA adapter (by name; "" is the base model). An adapter
  // not in host memory (beyond --max-cpu-loras, an LRU cache) is taken from `lora_image` when
  // given (read_lora_adapter off this thread), else read again from its directory here.
  // Throws gs::Error for a name that is not served, or an adapter that cannot be read.
  RequestId add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params, const std::string& lora_name,
                        std::shared_ptr<const LoraSlotImage> lora_image = nullptr);
  // Adapter names served beside the base model: --lora-modules, then run-time loads, in order.
  std::vector<std::string> lora_names() const;
  // Those of them held in host memory now, and the PEFT directory of a served one ("" if none).
  std::vector<std::string> held_lora_names() const;
  std::string lora_path(const std::string& name) const;

  // Run-time LoRA adapters (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter; needs
  // --enable-lora). read_lora_adapter reads and checks a PEFT directory: it is thread-safe, made
  // for a thread other than the one stepping (the slow part, off the step loop). Then, between
  // steps on the stepping thread, add_lora_adapter serves it under `name` from the next step
  // (throws for a name in use; beyond --max-cpu-loras the least recently used adapter no request
  // uses leaves host memory, to be read again when named), and remove_lora_adapter stops
  // serving `name` (throws for an unknown name): new requests naming it are refused, those that
  // use it finish with it, then its host memory and device slot are freed. Neither captures
  // graphs nor allocates device memory. Errors are gs::Error naming the file and field at fault.
  std::shared_ptr<const LoraSlotImage> read_lora_adapter(const std::string& name, const std::string& path) const;
  void add_lora_adapter(const std::string& name, std::shared_ptr<const LoraSlotImage> image);
  void remove_lora_adapter(const std::string& name);
  // Structured output: compiles a constraint (JSON schema, regex, choice, grammar) for this
  // model's vocabulary, cached by the spec. Thread-safe, made for the server's HTTP threads so
  // compilation never holds up steps; throws structured::ConstraintError naming the problem.
  // The result goes into SamplingParams::grammar.
  std::shared_ptr<const structured::CompiledGrammar> compile_constraint(const structured::ConstraintSpec& spec) const;
  // Finishes a request now (finish_reason Abort) and frees its KV blocks. Unknown ids are ignored.
  void abort_request(RequestId id);

  bool has_unfinished_requests() const;
  // Runs one scheduler step (possibly none when idle); returns per-request outputs.
  std::vector<RequestOutput> step();

  const Tokenizer& tokenizer() const;
  const ModelConfig& model_config() const;
  const EngineConfig& config() const;
  // What requests leave out takes these (EngineConfig::generation_config); add_request takes
  // complete parameters, so callers start from a copy of these.
  const SamplingParams& default_sampling_params() const;
  std::string model_name() const;
  // The context length: the runner's, lowered to what the KV cache can hold for one request.
  int max_model_len() const;
  EngineStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gs
