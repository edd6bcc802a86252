// ResponseBuilder: turns one HTTP request's engine outputs into OpenAI's response shapes:
// the final body (text_completion / chat.completion) and the streaming chunks
// (text_completion / chat.completion.chunk), with usage and logprobs.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "server/engine_client.h"
#include "server/openai_request.h"

namespace gs {

std::string finish_reason_string(FinishReason r);  // "stop", "length", "abort", "" (none)
std::string new_response_id(ApiKind kind);         // cmpl-... / chatcmpl-...
// One Server-Sent Event carrying `chunk` (or the literal [DONE]).
std::string sse_event(const nlohmann::json& chunk);
std::string sse_done();

class ResponseBuilder {
 public:
  ResponseBuilder(const GenerationRequest& req, std::string model, const EngineClient& client);

  // Chat streams open with a role chunk per choice; completions have none.
  std::vector<nlohmann::json> opening_chunks() const;
  // Records one output; returns the stream chunks it produces (possibly none).
  std::vector<nlohmann::json> add(const ChoiceOutput& item);
  bool finished(int choice) const { return choices_[choice].finished; }
  bool all_finished() const;
  int num_choices() const { return static_cast<int>(choices_.size()); }

  nlohmann::json response() const;     // the non-streaming body
  nlohmann::json usage() const;        // {prompt_tokens, completion_tokens, total_tokens}
  nlohmann::json usage_chunk() const;  // the final stream chunk for include_usage

 private:
  struct Choice {
    std::string text;
    nlohmann::json logprobs;         // accumulated, in the endpoint's shape; null when not requested
    nlohmann::json prompt_logprobs;  // vLLM's [null, {id: {logprob, rank, decoded_token}}, ...]
    bool started = false;            // the first output (which carries the prompt's logprobs) arrived
    size_t text_offset = 0;          // completions logprobs: where the next token's text starts
    int output_tokens = 0;
    bool finished = false;
    FinishReason reason = FinishReason::None;
    std::string stop_reason;
    bool tool_calls = false;  // finished with tool calls (finish_reason "tool_calls")
  };
  nlohmann::json chunk_base() const;
  nlohmann::json logprobs_delta(Choice& c, const RequestOutput& out) const;
  // echo: the prompt's tokens as the first logprobs entries (the first token has none).
  nlohmann::json echo_logprobs(Choice& c, const std::vector<int32_t>& prompt, const RequestOutput& out) const;
  nlohmann::json vllm_prompt_logprobs(const std::vector<int32_t>& prompt, const RequestOutput& out) const;
  static void append_logprobs(nlohmann::json& acc, const nlohmann::json& delta);
  nlohmann::json choice_chunk(int index, const std::string& text, const nlohmann::json& logprobs,
                              const Choice& c) const;

  ApiKind kind_;
  std::string id_, model_;
  int64_t created_;
  int top_logprobs_;
  bool echo_ = false;
  bool prompt_logprobs_ = false;
  std::vector<std::vector<int32_t>> prompts_;
  int n_ = 1;
  int prompt_tokens_ = 0;
  const EngineClient* client_;
  std::vector<Choice> choices_;
  ChatOutputOptions chat_output_;          // tool calls and reasoning (chat)
  std::vector<ChatOutputStream> streams_;  // per choice, when chat_output_ is active
};

}  // namespace gs
