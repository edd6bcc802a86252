// Implements server/request_fields.h.
#include "server/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "core/logging.h"
#include "server/api_error.h"

namespace gs {

using nlohmann::json;

namespace {

// Read by parse_common / parse_*_request, or harmless metadata.
constexpr std::array<std::string_view, 35> kCommon = {
    "model",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "min_tokens",
    "skip_special_tokens",
    "n",
    "stream",
    "stream_options",
    "echo",
    "best_of",
    "max_tokens",
    "logprobs",
    "logit_bias",
    "user",
    "metadata",
    "store",
    "service_tier",
    "spaces_between_special_tokens",
    "prompt_logprobs",
    "response_format",  // structured output: server/structured_request.h
    "structured_outputs",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend"};
constexpr std::array<std::string_view, 2> kCompletion = {"prompt", "suffix"};
constexpr std::array<std::string_view, 8> kChat = {
    "messages", "max_completion_tokens", "top_logprobs", "add_generation_prompt",
    "tools",    "parallel_tool_calls",   "tool_choice",  "chat_template_kwargs"};  // server/tool_calls.h

// Supported only at their default value (false / "none" / empty), which is our behaviour.
bool is_default(const json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_object() || v.is_array()) return v.empty();
  if (v.is_string()) return v == "none";
  return false;
}

struct Unsupported {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<Unsupported, 6> kUnsupported = {{
    {"functions", "function calling is not supported"},
    {"function_call", "function calling is not supported (only \"none\")"},
    {"chat_template", "a per-request chat template is not supported; start the server with --chat-template"},
    {"include_stop_str_in_output", "'include_stop_str_in_output': true is not supported"},
    {"continue_final_message", "'continue_final_message': true is not supported"},
    {"audio", "audio output is not supported"},
}};

template <size_t N>
bool in(const std::array<std::string_view, N>& names, std::string_view key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

}  // namespace

void check_request_fields(const json& body, ApiKind kind) {
  if (!body.is_object()) return;
  std::string unknown;
  for (const auto& [key, value] : body.items()) {
    auto u =
        std::find_if(kUnsupported.begin(), kUnsupported.end(), [&](const Unsupported& x) { return x.name == key; });
    if (u != kUnsupported.end()) {
      if (!is_default(value)) bad_param(key, fmt::format("'{}': {}", key, u->why));
      continue;
    }
    const bool known = in(kCommon, key) || (kind == ApiKind::Chat ? in(kChat, key) : in(kCompletion, key));
    if (!known) unknown += (unknown.empty() ? "" : ", ") + key;
  }
  if (!unknown.empty()) spdlog::debug("ignoring unknown request fields: {}", unknown);
}

}  // namespace gs
