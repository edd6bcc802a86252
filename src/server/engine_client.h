// EngineClient: what the HTTP layer needs from an engine running on its own thread.
// Thread-safe; the real one is EngineLoop (over LLMEngine), tests use a fake.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/llm_engine.h"
#include "runner/sampling_params.h"
#include "server/output_queue.h"

namespace gs {

struct ServedModel {
  std::string name;                  // what clients put in "model" (and what responses carry)
  std::vector<std::string> aliases;  // other names clients may use (--served-model-name a b)
  int max_model_len = 0;             // prompt + output tokens
  int vocab_size = 0;
  std::string chat_template;  // "" when the model has none
  std::string bos_token, eos_token, unk_token, pad_token;
  SamplingParams sampling_defaults;     // what requests leave out (the model's generation_config.json)
  std::vector<std::string> lora_names;  // LoRA adapters served beside it (--lora-modules)
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;
  virtual const ServedModel& model() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
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
};

}  // namespace gs
