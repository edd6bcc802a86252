// Implements server/openai_request.h (GenerationRequest).
#include "server/openai_request.h"
#include "server/structured_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/json_fields.h"
#include "server/lora_policy.h"
#include "server/request_bounds.h"
#include "server/request_fields.h"

namespace gs {

using nlohmann::json;
namespace f = fields;

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

// The LoRA adapter the request names in "model" ("" for the base model, or no "model"); any
// other name is vLLM's 404.
std::string check_model(const json& body, const EngineClient& client) {
  if (!f::present(body, "model")) return "";  // optional: the one served model
  std::string model = f::get_string(body, "model", "");
  if (model.size() > kMaxModelNameBytes)
    bad_param("model", fmt::format("'model' is {} bytes long; no served name is longer than {}", model.size(),
                                   kMaxModelNameBytes));
  const auto& aliases = client.model().aliases;
  if (model == client.model().name || std::find(aliases.begin(), aliases.end(), model) != aliases.end()) return "";
  const std::vector<std::string> loras = client.lora_names();
  if (std::find(loras.begin(), loras.end(), model) != loras.end()) return model;
  throw ApiError::model_not_found(model);
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100], ...}.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body, int vocab_size) {
  if (!f::present(body, "logit_bias")) return {};
  const json& lb = body["logit_bias"];
  if (!lb.is_object())
    bad_param("logit_bias", "'logit_bias' must be an object mapping token ids (as strings) to biases in [-100, 100]");
  if (lb.size() > kMaxLogitBias)
    bad_param("logit_bias",
              fmt::format("'logit_bias' names {} tokens; at most {} are allowed", lb.size(), kMaxLogitBias));
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : lb.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= vocab_size)
      bad_param("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key, vocab_size));
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
      bad_param("logit_bias", fmt::format("'logit_bias' value for token {} must be a number in [-100, 100]", id));
    out.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return out;
}

// Fields shared by both endpoints. max_tokens is resolved later, once the prompt is known.
// Sampling fields a request leaves out take the model's defaults (generation_config.json).
void parse_common(const json& body, GenerationRequest& r, const RequestLimits& limits, const EngineClient& client) {
  SamplingParams& p = r.params;
  const SamplingParams& d = client.model().sampling_defaults;
  p.temperature = static_cast<float>(f::get_number(body, "temperature", d.temperature, 0.0, 2.0));
  p.top_p = static_cast<float>(f::get_number(body, "top_p", d.top_p, 0.0, 1.0));
  if (p.top_p <= 0.0f) bad_param("top_p", "'top_p' must be in (0, 1]");
  p.top_k = static_cast<int>(f::get_int(body, "top_k", d.top_k, -1, kIntMax));
  p.min_p = static_cast<float>(f::get_number(body, "min_p", d.min_p, 0.0, 1.0));
  p.presence_penalty = static_cast<float>(f::get_number(body, "presence_penalty", 0.0, -2.0, 2.0));
  p.frequency_penalty = static_cast<float>(f::get_number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  p.repetition_penalty = static_cast<float>(f::get_number(body, "repetition_penalty", d.repetition_penalty, 0.0, 10.0));
  p.logit_bias = parse_logit_bias(body, client.model().vocab_size);
  if (p.repetition_penalty <= 0.0f) bad_param("repetition_penalty", "'repetition_penalty' must be > 0");
  if (auto seed =
          f::get_optional_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    p.seed = static_cast<uint64_t>(*seed);
  p.stop = f::get_string_or_list(body, "stop", 16);
  check_stop_bytes(p.stop);
  p.stop_token_ids = f::get_int_list(body, "stop_token_ids", 0, kIntMax, kMaxStopTokenIds);
  p.ignore_eos = f::get_bool(body, "ignore_eos", false);
  p.min_tokens = static_cast<int>(f::get_int(body, "min_tokens", 0, 0, kIntMax));
  p.skip_special_tokens = f::get_bool(body, "skip_special_tokens", true);
  r.n = static_cast<int>(f::get_int(body, "n", 1, 1, limits.max_n));
  r.stream = f::get_bool(body, "stream", false);
  if (f::present(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) bad_param("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad_param("stream_options", "'stream_options' is only allowed with \"stream\": true");
    r.include_usage = f::get_bool(so, "include_usage", false);
    r.continuous_usage = r.include_usage && f::get_bool(so, "continuous_usage_stats", false);
  }
  if (f::present(body, "prompt_logprobs"))
    r.params.prompt_logprobs = static_cast<int>(f::get_int(body, "prompt_logprobs", 0, 0, 20));
  if (f::present(body, "best_of") && f::get_int(body, "best_of", 1, 1, kIntMax) != r.n)
    bad_param("best_of", "'best_of' other than n is not supported");
}

std::vector<int32_t> token_list(const json& v, const EngineClient& client) {
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer()) bad_param("prompt", "a token-id prompt must contain only integers");
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= client.model().vocab_size)
      bad_param("prompt", fmt::format("token id {} is outside the vocabulary [0, {})", id, client.model().vocab_size));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// A string, a list of strings, a list of token ids, or a list of token-id lists.
std::vector<std::vector<int32_t>> parse_prompts(const json& body, const EngineClient& client,
                                                const RequestLimits& limits) {
  if (!f::present(body, "prompt")) bad_param("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  std::vector<std::vector<int32_t>> out;
  if (p.is_string() && p.get_ref<const std::string&>().empty()) {
    bad_param("prompt", "'prompt' is an empty string");
  } else if (p.is_string()) {
    out.push_back(encode_prompt(client, p.get_ref<const std::string&>(), true, "prompt"));
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    out.push_back(token_list(p, client));
  } else if (p.is_array() && !p.empty()) {
    if (p.size() > static_cast<size_t>(limits.max_prompts))
      bad_param("prompt",
                fmt::format("{} prompts in one request; at most {} are allowed", p.size(), limits.max_prompts));
    for (const json& item : p) {
      if (item.is_string() && item.get_ref<const std::string&>().empty())
        bad_param("prompt", "a prompt in the list is an empty string");
      else if (item.is_string()) {
        out.push_back(encode_prompt(client, item.get_ref<const std::string&>(), true, "prompt"));
      } else if (item.is_array())
        out.push_back(token_list(item, client));
      else
        bad_param("prompt", "'prompt' lists must hold strings or lists of token ids");
    }
  } else {
    bad_param("prompt",
              "'prompt' must be a non-empty string, list of strings, list of token "
              "ids, or list of token-id lists");
  }
  for (const auto& ids : out)
    if (ids.empty()) bad_param("prompt", "a prompt is empty (no tokens)");
  return out;
}

// max_tokens: the request's, else `def` (0: what the context leaves). Checks the context length.
void resolve_max_tokens(const json& body, const char* key, int def, GenerationRequest& r, const EngineClient& client) {
  const int ctx = client.model().max_model_len;
  size_t longest = 0;
  for (const auto& ids : r.prompts) longest = std::max(longest, ids.size());
  const int prompt_len = static_cast<int>(longest);
  if (prompt_len >= ctx)
    throw ApiError(400,
                   fmt::format("this model's maximum context length is {} tokens, but the "
                               "prompt has {} tokens; shorten the prompt",
                               ctx, prompt_len),
                   "prompt", "invalid_request_error", "context_length_exceeded");
  auto req = f::get_optional_int(body, key, 1, kIntMax);
  int max_tokens = req ? static_cast<int>(*req) : (def > 0 ? std::min(def, ctx - prompt_len) : ctx - prompt_len);
  if (prompt_len + max_tokens > ctx)
    throw ApiError(400,
                   fmt::format("this model's maximum context length is {} tokens, but {} "
                               "tokens were requested ({} in the prompt, {} for the "
                               "completion); lower {} or shorten the prompt",
                               ctx, prompt_len + max_tokens, prompt_len, max_tokens, key),
                   key, "invalid_request_error", "context_length_exceeded");
  r.params.max_tokens = max_tokens;
}

void check_choices(const GenerationRequest& r, const RequestLimits& limits) {
  if (r.num_choices() > limits.max_choices)
    bad_param("n", fmt::format("prompts x n is {}; at most {} are allowed", r.num_choices(), limits.max_choices));
}

}  // namespace

GenerationRequest parse_completion_request(const json& body, const EngineClient& client, const RequestLimits& limits,
                                           const nlohmann::ordered_json* ordered) {
  check_request_fields(body, ApiKind::Completion);
  GenerationRequest r;
  r.lora = check_model(body, client);
  r.kind = ApiKind::Completion;
  parse_common(body, r, limits, client);
  if (f::present(body, "logprobs")) r.top_logprobs = static_cast<int>(f::get_int(body, "logprobs", 0, 0, 20));
  if (f::present(body, "suffix")) bad_param("suffix", "'suffix' is not supported");
  r.echo = f::get_bool(body, "echo", false);
  r.prompts = parse_prompts(body, client, limits);
  check_choices(r, limits);
  resolve_max_tokens(body, "max_tokens", 16, r, client);
  r.params.logprobs = r.top_logprobs;
  // echo with logprobs reports the prompt's tokens too (the first has none).
  if (r.echo && r.top_logprobs >= 0) r.params.prompt_logprobs = std::max(r.params.prompt_logprobs, r.top_logprobs);
  if (auto f = parse_structured_fields(ordered ? *ordered : nlohmann::ordered_json(body)))
    apply_structured_field(*f, client, r.params);
  check_logprob_volume(r);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const nlohmann::ordered_json& ordered,
                                     const EngineClient& client, const std::string& chat_template,
                                     const RequestLimits& limits) {
  check_request_fields(body, ApiKind::Chat);
  GenerationRequest r;
  r.lora = check_model(body, client);
  r.kind = ApiKind::Chat;
  parse_common(body, r, limits, client);
  if (f::get_bool(body, "echo", false)) bad_param("echo", "'echo' is a /v1/completions field");
  if (f::get_bool(body, "logprobs", false))
    r.top_logprobs = static_cast<int>(f::get_int(body, "top_logprobs", 0, 0, 20));
  else if (f::present(body, "top_logprobs"))
    bad_param("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
  if (!body.contains("messages")) bad_param("messages", "'messages' is required");
  nlohmann::ordered_json messages = normalize_chat_messages(ordered["messages"]);
  nlohmann::ordered_json tools = chat_tools(ordered);
  bool add_generation_prompt = f::get_bool(body, "add_generation_prompt", true);
  std::string prompt = render_chat_prompt(chat_template, messages, tools, add_generation_prompt, client.model(),
                                          chat_template_kwargs(ordered));
  // The template already writes the special tokens it wants (as vLLM: no BOS added here).
  r.prompts.push_back(encode_prompt(client, prompt, false, "messages"));
  if (r.prompts[0].empty()) bad_param("messages", "the chat template rendered an empty prompt");
  check_choices(r, limits);
  const char* key = f::present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  resolve_max_tokens(body, key, 0, r, client);
  r.params.logprobs = r.top_logprobs;
  if (auto f = parse_structured_fields(ordered)) apply_structured_field(*f, client, r.params);
  check_logprob_volume(r);
  return r;
}

}  // namespace gs
