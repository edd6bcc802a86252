// GenerationRequest: a validated /v1/completions or /v1/chat/completions body, tokenized.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "server/engine_client.h"
#include "server/tool_calls.h"
#include "types/sampling_params.h"

namespace gs {

enum class ApiKind { Completion, Chat };

struct GenerationRequest {
  ApiKind kind = ApiKind::Completion;
  std::vector<std::vector<int32_t>> prompts;  // token ids, one list per prompt
  SamplingParams params;                      // for every choice (seeds offset per sample)
  int n = 1;                                  // samples per prompt
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats: usage on every chunk
  int top_logprobs = -1;          // -1: no logprobs; else top alternatives per token
  bool echo = false;              // completions: the prompt leads the text (and logprobs)
  std::string lora;               // the LoRA adapter named in "model"; "": the base model
  ChatOutputOptions chat_output;  // chat: tool calls and reasoning in the output (server/tool_calls.h)
  int num_choices() const { return static_cast<int>(prompts.size()) * n; }
  // Choice c samples prompt c / n.
  const std::vector<int32_t>& prompt_of(int choice) const { return prompts[choice / n]; }
};

struct RequestLimits {
  int max_prompts = 64;  // prompts in one completions request
  int max_n = 16;        // samples per prompt
  int max_choices = 64;  // prompts * n
};

// Throw ApiError (400) naming the field at fault.
// `ordered`, when given, is the body parsed keeping key order (a JSON schema's property order).
GenerationRequest parse_completion_request(const nlohmann::json& body, const EngineClient& client,
                                           const RequestLimits& limits = {},
                                           const nlohmann::ordered_json* ordered = nullptr);
// `ordered` is the same body parsed keeping key order (for messages and tools).
GenerationRequest parse_chat_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                     const EngineClient& client, const std::string& chat_template,
                                     const RequestLimits& limits = {});

}  // namespace gs
