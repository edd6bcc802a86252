// Implements server/openai_response.h (ResponseBuilder).
#include "server/openai_response.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "tokenizer/utf8.h"

namespace gs {

using nlohmann::json;

std::string finish_reason_string(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    default: return "";
  }
}

std::string new_response_id(ApiKind kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", kind == ApiKind::Chat ? "chatcmpl-" : "cmpl-", rng(), rng());
}

std::string sse_event(const json& chunk) {
  // Replace invalid UTF-8 rather than throw: a stream must never die on one odd token.
  return "data: " + chunk.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}
std::string sse_done() { return "data: [DONE]\n\n"; }

namespace {

// finish_reason "tool_calls": the output holds calls of a required or auto tool_choice (a named
// one answers "stop", as OpenAI), and was not cut by max_tokens ("length" says that).
bool tool_calls_finish(bool calls, const ChatOutputOptions& o, FinishReason reason) {
  return calls && o.tools != ChatOutputOptions::Tools::kNamed && reason != FinishReason::Length;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// A token's bytes as a JSON string: themselves when they are UTF-8, else "bytes:\xNN..." as
// OpenAI writes a token that is part of a character (its "bytes" field has the real values).
std::string token_string(const std::string& bytes) {
  if (utf8::lossy(bytes) == bytes) return bytes;
  std::string s = "bytes:";
  for (unsigned char c : bytes) s += fmt::format("\\x{:02x}", c);
  return s;
}

}  // namespace

ResponseBuilder::ResponseBuilder(const GenerationRequest& req, std::string model, const EngineClient& client)
    : kind_(req.kind),
      id_(new_response_id(req.kind)),
      model_(std::move(model)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      top_logprobs_(req.top_logprobs),
      echo_(req.echo),
      prompt_logprobs_(req.params.prompt_logprobs >= 0),
      prompts_(req.prompts),
      n_(req.n),
      client_(&client),
      choices_(req.num_choices()),
      chat_output_(req.kind == ApiKind::Chat ? req.chat_output : ChatOutputOptions{}) {
  if (chat_output_.active()) streams_.assign(choices_.size(), ChatOutputStream(chat_output_));
  for (const auto& p : req.prompts) prompt_tokens_ += static_cast<int>(p.size());
  for (auto& c : choices_) {
    if (top_logprobs_ < 0)
      c.logprobs = nullptr;
    else if (kind_ == ApiKind::Chat)
      c.logprobs = {{"content", json::array()}};
    else
      c.logprobs = {{"tokens", json::array()},
                    {"token_logprobs", json::array()},
                    {"top_logprobs", json::array()},
                    {"text_offset", json::array()}};
  }
}

json ResponseBuilder::chunk_base() const {
  return {{"id", id_},
          {"object", kind_ == ApiKind::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_}};
}

std::vector<json> ResponseBuilder::opening_chunks() const {
  std::vector<json> out;
  if (kind_ != ApiKind::Chat) return out;
  for (int i = 0; i < num_choices(); ++i) {
    json chunk = chunk_base();
    chunk["choices"] = json::array({{{"index", i},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    out.push_back(std::move(chunk));
  }
  return out;
}

// This output's logprobs in the endpoint's shape (same shape as the accumulated one).
json ResponseBuilder::logprobs_delta(Choice& c, const RequestOutput& out) const {
  if (top_logprobs_ < 0) return nullptr;
  if (kind_ == ApiKind::Chat) {
    json content = json::array();
    for (const TokenLogprob& lp : out.logprobs) {
      const std::string tok = client_->token_text(lp.token);
      json top = json::array();
      for (const auto& [id, p] : lp.top) {
        const std::string t = client_->token_text(id);
        top.push_back({{"token", token_string(t)}, {"logprob", p}, {"bytes", bytes_of(t)}});
      }
      content.push_back(
          {{"token", token_string(tok)}, {"logprob", lp.logprob}, {"bytes", bytes_of(tok)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json d = {{"tokens", json::array()},
            {"token_logprobs", json::array()},
            {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
  for (const TokenLogprob& lp : out.logprobs) {
    const std::string tok = client_->token_text(lp.token);
    json top = json::object();
    for (const auto& [id, p] : lp.top) top[token_string(client_->token_text(id))] = p;
    d["tokens"].push_back(token_string(tok));
    d["token_logprobs"].push_back(lp.logprob);
    d["top_logprobs"].push_back(top);
    d["text_offset"].push_back(c.text_offset);
    c.text_offset += tok.size();
  }
  return d;
}

json ResponseBuilder::echo_logprobs(Choice& c, const std::vector<int32_t>& prompt, const RequestOutput& out) const {
  json d = {{"tokens", json::array()},
            {"token_logprobs", json::array()},
            {"top_logprobs", json::array()},
            {"text_offset", json::array()}};
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string tok = client_->token_text(prompt[i]);
    const TokenLogprob* lp = i > 0 && i - 1 < out.prompt_logprobs.size() ? &out.prompt_logprobs[i - 1] : nullptr;
    json top = nullptr;
    if (lp) {
      top = json::object();
      for (size_t k = 0; k < lp->top.size() && int(k) < top_logprobs_; ++k)
        top[token_string(client_->token_text(lp->top[k].first))] = lp->top[k].second;
    }
    d["tokens"].push_back(token_string(tok));
    d["token_logprobs"].push_back(lp ? json(lp->logprob) : json(nullptr));
    d["top_logprobs"].push_back(top);
    d["text_offset"].push_back(c.text_offset);
    c.text_offset += tok.size();
  }
  return d;
}

json ResponseBuilder::vllm_prompt_logprobs(const std::vector<int32_t>& prompt, const RequestOutput& out) const {
  json list = json::array({nullptr});
  for (const TokenLogprob& lp : out.prompt_logprobs) {
    json entry = json::object();
    auto add = [&](int32_t id, float logprob, json rank) {
      entry[std::to_string(id)] = {
          {"logprob", logprob}, {"rank", rank}, {"decoded_token", token_string(client_->token_text(id))}};
    };
    json own_rank = nullptr;
    for (size_t k = 0; k < lp.top.size(); ++k) {
      add(lp.top[k].first, lp.top[k].second, int(k) + 1);
      if (lp.top[k].first == lp.token) own_rank = int(k) + 1;
    }
    add(lp.token, lp.logprob, own_rank);
    list.push_back(std::move(entry));
  }
  while (list.size() < prompt.size()) list.push_back(nullptr);  // positions not computed (none expected)
  return list;
}

void ResponseBuilder::append_logprobs(json& acc, const json& delta) {
  if (acc.is_null() || delta.is_null()) return;
  for (auto& [key, list] : delta.items())
    for (const json& v : list) acc[key].push_back(v);
}

json ResponseBuilder::choice_chunk(int index, const std::string& text, const json& logprobs, const Choice& c) const {
  json choice = {{"index", index}, {"logprobs", logprobs}};
  if (kind_ == ApiKind::Chat && chat_output_.active())
    choice["delta"] = json::parse(text);  // the delta ChatOutputStream built (add())
  else if (kind_ == ApiKind::Chat)
    choice["delta"] = text.empty() && c.finished ? json::object() : json{{"content", text}};
  else
    choice["text"] = text;
  std::string reason = c.tool_calls ? "tool_calls" : finish_reason_string(c.reason);
  choice["finish_reason"] = c.finished ? json(reason) : json(nullptr);
  if (kind_ == ApiKind::Completion) choice["stop_reason"] = c.stop_reason.empty() ? json(nullptr) : json(c.stop_reason);
  json chunk = chunk_base();
  chunk["choices"] = json::array({choice});
  return chunk;
}

std::vector<json> ResponseBuilder::add(const ChoiceOutput& item) {
  if (item.choice < 0 || item.choice >= num_choices()) return {};
  Choice& c = choices_[item.choice];
  if (c.finished) return {};
  const RequestOutput& out = item.out;
  std::string text;
  json lp = nullptr;
  const bool first = !c.started;
  if (first) {  // the prompt's part: echoed text and logprobs, vLLM's prompt_logprobs
    c.started = true;
    const std::vector<int32_t>& prompt = prompts_[size_t(item.choice / n_)];
    if (echo_) {
      text = client_->decode(prompt, /*skip_special_tokens=*/true);
      if (top_logprobs_ >= 0) lp = echo_logprobs(c, prompt, out);
    }
    if (prompt_logprobs_) c.prompt_logprobs = vllm_prompt_logprobs(prompt, out);
  }
  text += out.new_text;
  c.text += text;
  c.output_tokens = std::max(c.output_tokens, out.num_output_tokens);
  const json generated = logprobs_delta(c, out);
  if (lp.is_null())
    lp = generated;
  else
    append_logprobs(lp, generated);
  append_logprobs(c.logprobs, lp);
  if (out.finished) {
    c.finished = true;
    c.reason = out.finish_reason == FinishReason::None ? FinishReason::Stop : out.finish_reason;
    c.stop_reason = out.stop_reason;
  }
  bool has_logprobs = !lp.is_null() && !out.logprobs.empty();
  // A step that produced tokens is streamed even when their text is empty (a token ending
  // inside a UTF-8 character, or one that decodes to nothing), as vLLM does: clients see every
  // step, and time-to-first-token means the first token.
  if (text.empty() && out.new_token_ids.empty() && !has_logprobs && !out.finished) return {};
  std::vector<json> chunks;
  if (!streams_.empty()) {  // tool calls / reasoning: the deltas come from the output stream
    ChatOutputStream& stream = streams_[size_t(item.choice)];
    std::vector<nlohmann::ordered_json> deltas = stream.feed(text);
    if (c.finished) {
      bool calls = false;
      for (auto& d : stream.finish(calls)) deltas.push_back(std::move(d));
      c.tool_calls = tool_calls_finish(calls, chat_output_, c.reason);
    }
    if (deltas.empty()) deltas.emplace_back(nlohmann::ordered_json::object());
    for (size_t k = 0; k < deltas.size(); ++k) {  // the step's logprobs on the first, its finish on the last
      chunks.push_back(choice_chunk(item.choice, deltas[k].dump(-1, ' ', false, json::error_handler_t::replace),
                                    k == 0 ? lp : json(nullptr), c));
      if (k + 1 < deltas.size()) chunks.back()["choices"][0]["finish_reason"] = nullptr;
    }
  } else {
    chunks.push_back(choice_chunk(item.choice, text, lp, c));
  }
  if (first && prompt_logprobs_) chunks[0]["choices"][0]["prompt_logprobs"] = c.prompt_logprobs;
  return chunks;
}

bool ResponseBuilder::all_finished() const {
  for (const auto& c : choices_)
    if (!c.finished) return false;
  return true;
}

json ResponseBuilder::usage() const {
  int completion = 0;
  for (const auto& c : choices_) completion += c.output_tokens;
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion}};
}

json ResponseBuilder::usage_chunk() const {
  json chunk = chunk_base();
  chunk["choices"] = json::array();
  chunk["usage"] = usage();
  return chunk;
}

json ResponseBuilder::response() const {
  json choices = json::array();
  for (int i = 0; i < num_choices(); ++i) {
    const Choice& c = choices_[i];
    json choice = {{"index", i}, {"logprobs", c.logprobs}, {"finish_reason", finish_reason_string(c.reason)}};
    if (kind_ == ApiKind::Chat && chat_output_.active()) {
      bool calls = false;
      choice["message"] = json::parse(ChatOutputStream::message(chat_output_, c.text, calls).dump());
      if (tool_calls_finish(calls, chat_output_, c.reason)) choice["finish_reason"] = "tool_calls";
    } else if (kind_ == ApiKind::Chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
      choice["stop_reason"] = c.stop_reason.empty() ? json(nullptr) : json(c.stop_reason);
    }
    if (prompt_logprobs_) choice["prompt_logprobs"] = c.prompt_logprobs;
    choices.push_back(std::move(choice));
  }
  return {{"id", id_},           {"object", kind_ == ApiKind::Chat ? "chat.completion" : "text_completion"},
          {"created", created_}, {"model", model_},
          {"choices", choices},  {"usage", usage()}};
}

}  // namespace gs
