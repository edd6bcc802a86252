// EngineClient: what the HTTP layer needs from an engine running on its own thread.
// Thread-safe; the real one is EngineLoop (over LLMEngine), tests use a fake.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/llm_engine.h"
#include "server/histogram.h"
#include "server/output_queue.h"
#include "types/pooling.h"
#include "types/sampling_params.h"

namespace gs::structured {
struct ConstraintSpec;
class CompiledGrammar;
}  // namespace gs::structured

namespace gs {

struct ServedModel {
  std::string name;                  // what clients put in "model" (and what responses carry)
  std::vector<std::string> aliases;  // other names clients may use (--served-model-name a b)
  int max_model_len = 0;             // prompt + output tokens
  int vocab_size = 0;
  std::string chat_template;  // "" when the model has none
  std::string bos_token, eos_token, unk_token, pad_token;
  SamplingParams sampling_defaults;                 // what requests leave out (the model's generation_config.json)
  std::map<std::string, std::string> cache_config;  // KV cache settings (vllm:cache_config_info labels)
  // A pooling model (--runner pooling) serves /v1/embeddings instead of generation.
  bool pooling = false;
  Pooling pooling_type = Pooling::Last;
  int hidden_size = 0;               // the embedding's size
  bool matryoshka = false;           // requests may ask for fewer `dimensions`
  std::vector<int> matryoshka_dims;  // the sizes allowed (empty: any up to hidden_size)
  bool lora_enabled = false;         // --enable-lora: adapters may be served
  int max_token_bytes = 0;           // the longest token's text, in bytes (0: unknown)
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  virtual const ServedModel& model() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // encode, stopping once the text has more than max_tokens tokens (the result is then longer
  // than max_tokens: see Tokenizer::encode). Clients without that stop encode it all.
  virtual std::vector<int32_t> encode_bounded(std::string_view text, bool add_special_tokens, size_t max_tokens) const {
    return encode(text, add_special_tokens);
  }
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  // The bytes one token adds to a text (leading space included; may be part of a character).
  virtual std::string token_text(int32_t id) const = 0;

  // Queues a request whose outputs go to `sink` tagged with `choice`, generated with the LoRA
  // adapter `lora` ("" for the base model). Throws gs::Error when the engine refuses it (the
  // message says why). Returns the engine's request id.
  virtual RequestId submit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                           std::shared_ptr<OutputQueue> sink, int choice, const std::string& lora) = 0;
  // Stops a request and frees its KV blocks; its sink receives nothing more.
  virtual void abort(RequestId id) = 0;
  // Requests queued but not yet running (for the --max-waiting-requests bound).
  virtual int num_waiting() const = 0;
  virtual EngineStats stats() const = 0;
  // Tokens per engine step so far (vllm:iteration_tokens_total); none counted by default.
  virtual Histogram iteration_tokens() const { return Histogram(token_count_bounds()); }

  // LoRA adapters served beside the model (--lora-modules, then run-time loads), in load order.
  virtual std::vector<std::string> lora_names() const = 0;
  // Run-time adapters (POST /v1/load_lora_adapter, /v1/unload_lora_adapter), as vLLM has them.
  // load_lora reads and checks the PEFT directory `path` on the calling thread, then the engine
  // serves it under `name` from its next step; unload_lora stops serving `name` (requests using
  // it finish with it). Both return once done and throw ApiError: 400 for a name already served
  // or a malformed adapter (one sentence for the client: the reason goes to the log); 404 for an
  // unknown name. `path` is checked by the caller (server/lora_policy.h).
  virtual void load_lora(const std::string& name, const std::string& path) = 0;
  virtual void unload_lora(const std::string& name) = 0;
  // Structured output: compiles a constraint on the calling (HTTP) thread, cached by the spec
  // (LLMEngine::compile_constraint). Throws structured::ConstraintError for a constraint that
  // cannot be compiled; engines without a vocabulary to constrain throw ApiError(400).
  virtual std::shared_ptr<const structured::CompiledGrammar> compile_constraint(
      const structured::ConstraintSpec& spec) const;
};

}  // namespace gs
