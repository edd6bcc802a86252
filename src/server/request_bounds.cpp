// Implements server/request_bounds.h.
#include "server/request_bounds.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"

namespace gs {

size_t max_prompt_bytes(const ServedModel& m) {
  constexpr size_t kNormalizerShrink = 4;
  if (m.max_token_bytes <= 0 || m.max_model_len <= 0) return 0;
  return size_t(m.max_model_len) * size_t(m.max_token_bytes) * kNormalizerShrink;
}

void check_prompt_bytes(size_t bytes, const ServedModel& m, const char* param) {
  const size_t bound = max_prompt_bytes(m);
  if (bound == 0 || bytes <= bound) return;
  throw ApiError(400,
                 fmt::format("the prompt has {} bytes: more than the {} tokens of this model's context can hold (at "
                             "most {} bytes); shorten the prompt",
                             bytes, m.max_model_len, bound),
                 param, "invalid_request_error", "context_length_exceeded");
}

std::vector<int32_t> encode_prompt(const EngineClient& client, std::string_view text, bool add_special_tokens,
                                   const char* param) {
  const ServedModel& m = client.model();
  check_prompt_bytes(text.size(), m, param);
  if (m.max_model_len <= 0) return client.encode(text, add_special_tokens);
  const size_t most = size_t(m.max_model_len) - 1;  // one more token is generated
  std::vector<int32_t> ids = client.encode_bounded(text, add_special_tokens, most);
  if (ids.size() > most)
    throw ApiError(400,
                   fmt::format("the prompt has at least {} tokens, but this model's context is {} tokens: a prompt "
                               "may have at most {}; shorten the prompt",
                               ids.size(), m.max_model_len, most),
                   param, "invalid_request_error", "context_length_exceeded");
  return ids;
}

void check_stop_bytes(const std::vector<std::string>& stop) {
  size_t total = 0;
  for (const std::string& s : stop) total += s.size();
  if (total > kMaxStopBytes)
    bad_param("stop",
              fmt::format("the stop strings have {} bytes together; at most {} are allowed", total, kMaxStopBytes));
}

void check_logprob_volume(const GenerationRequest& r) {
  const SamplingParams& p = r.params;
  int64_t entries = 0;
  for (int c = 0; c < r.num_choices(); ++c) {
    if (p.prompt_logprobs >= 0) entries += int64_t(r.prompt_of(c).size()) * (p.prompt_logprobs + 1);
    if (p.logprobs >= 0 && !r.stream) entries += int64_t(p.max_tokens) * (p.logprobs + 1);
  }
  if (entries > kMaxLogprobEntries)
    bad_param("logprobs", fmt::format("this request could return {} logprob entries (choices x tokens x (alternatives "
                                      "+ 1)); one reply holds at most {}: lower n, max_tokens or the number of "
                                      "logprobs, or set \"stream\": true",
                                      entries, kMaxLogprobEntries));
}

bool worth_trimming_after(const GenerationRequest& r) {
  const SamplingParams& p = r.params;
  int64_t entries = 0;
  for (int c = 0; c < r.num_choices(); ++c)
    entries += (int64_t(r.prompt_of(c).size()) + p.max_tokens) * (std::max({p.logprobs, p.prompt_logprobs, 0}) + 1);
  return entries >= kTrimAfterEntries;
}

}  // namespace gs
