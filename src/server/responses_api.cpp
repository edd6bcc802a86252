// Implements server/responses_api.h: /v1/responses bodies as chat requests, and the chat
// generation's output as response objects and Responses streaming events.
#include "server/responses_api.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace gs {

using nlohmann::json;
namespace f = fields;

namespace {

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A message item's content: a string, or a list of text parts joined.
std::string item_text(const json& content, size_t index) {
  if (content.is_string()) return content.get<std::string>();
  const std::string param = fmt::format("input[{}].content", index);
  if (!content.is_array()) bad_param(param, "'" + param + "' must be a string or a list of input_text parts");
  std::string text;
  for (const json& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      bad_param(param, fmt::format("'{}': only text parts (input_text, output_text) are supported, got '{}'", param,
                                   type.empty() ? std::string("not an object") : type));
    if (!part.contains("text") || !part["text"].is_string())
      bad_param(param, "'" + param + "': a text part needs a string 'text'");
    text += part["text"].get<std::string>();
  }
  return text;
}

// `input` as chat messages.
json input_messages(const json& body) {
  if (!body.contains("input")) bad_param("input", "'input' (a string or a list of input items) is required");
  const json& input = body["input"];
  if (input.is_string()) return json::array({{{"role", "user"}, {"content", input}}});
  if (!input.is_array() || input.empty()) bad_param("input", "'input' must be a string or a non-empty list of items");
  json messages = json::array();
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string param = fmt::format("input[{}]", i);
    if (!item.is_object()) bad_param(param, "'" + param + "' must be an object");
    const std::string type = item.value("type", "message");
    if (type != "message")
      bad_param(param, fmt::format("'{}': items of type '{}' are not supported (function tools are not supported "
                                   "yet); send message items",
                                   param, type));
    std::string role = item.contains("role") && item["role"].is_string() ? item["role"].get<std::string>() : "";
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system")
      bad_param(param + ".role", "'" + param + ".role' must be user, assistant, system or developer");
    if (!item.contains("content")) bad_param(param + ".content", "'" + param + ".content' is required");
    messages.push_back({{"role", role}, {"content", item_text(item["content"], i)}});
  }
  return messages;
}

void check_unsupported(const json& body) {
  if (body.contains("tools") && !body["tools"].is_null() && !body["tools"].empty())
    bad_param("tools", "'tools': function tools are not supported yet on /v1/responses");
  if (f::get_bool(body, "background", false)) bad_param("background", "'background': true is not supported");
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format")) {
    const json& fmt = body["text"]["format"];
    if (!fmt.is_object() || fmt.value("type", "text") != "text")
      bad_param("text.format", "'text.format': only {\"type\": \"text\"} is supported on /v1/responses");
  }
}

// The chat body: the sampling fields the Responses API shares with chat, passed through.
json chat_body_of(const json& body, json messages) {
  json chat = {{"messages", std::move(messages)}, {"stream", f::get_bool(body, "stream", false)}};
  for (const char* key : {"model", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
                          "frequency_penalty", "repetition_penalty", "ignore_eos", "min_tokens", "user"})
    if (f::present(body, key)) chat[key] = body[key];
  if (f::present(body, "max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  return chat;
}

// Streams and answers one response; stores it (with its conversation) when it ends.
class ResponsesFormat : public OutputFormat {
 public:
  ResponsesFormat(const json& body, json conversation, std::shared_ptr<ResponseStore> store)
      : id_(random_id("resp_")),
        item_id_(random_id("msg_")),
        created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                     .count()),
        conversation_(std::move(conversation)),
        store_(f::get_bool(body, "store", true) ? std::move(store) : nullptr) {
    for (const char* key :
         {"instructions", "max_output_tokens", "previous_response_id", "temperature", "top_p", "metadata", "user"})
      echo_[key] = f::present(body, key) ? body[key] : json(nullptr);
    if (echo_["metadata"].is_null()) echo_["metadata"] = json::object();
  }

  std::string opening(Generation& gen) override {
    model_ = gen.builder().response().value("model", "");
    json r = response_object("in_progress", nullptr, json::array(), nullptr);
    std::string out = event({{"type", "response.created"}, {"response", r}});
    out += event({{"type", "response.in_progress"}, {"response", r}});
    out += event({{"type", "response.output_item.added"}, {"output_index", 0}, {"item", message_item("", false)}});
    out += event({{"type", "response.content_part.added"},
                  {"item_id", item_id_},
                  {"output_index", 0},
                  {"content_index", 0},
                  {"part", text_part("")}});
    return out;
  }

  std::string events(Generation&, const std::vector<json>& chunks) override {
    std::string out;
    for (const json& c : chunks) {
      if (!c.contains("choices") || c["choices"].empty()) continue;
      const json& delta = c["choices"][0].value("delta", json::object());
      const std::string text = delta.is_object() ? delta.value("content", "") : "";
      if (text.empty()) continue;
      out += event({{"type", "response.output_text.delta"},
                    {"item_id", item_id_},
                    {"output_index", 0},
                    {"content_index", 0},
                    {"delta", text},
                    {"logprobs", json::array()}});
    }
    return out;
  }

  std::string closing(Generation& gen) override {
    const json r = finish(gen);
    const std::string text = r["output"][0]["content"][0]["text"];
    std::string out = event({{"type", "response.output_text.done"},
                             {"item_id", item_id_},
                             {"output_index", 0},
                             {"content_index", 0},
                             {"text", text},
                             {"logprobs", json::array()}});
    out += event({{"type", "response.content_part.done"},
                  {"item_id", item_id_},
                  {"output_index", 0},
                  {"content_index", 0},
                  {"part", text_part(text)}});
    out += event({{"type", "response.output_item.done"}, {"output_index", 0}, {"item", r["output"][0]}});
    out += event({{"type", "response.completed"}, {"response", r}});
    return out;
  }

  std::string body(Generation& gen) override { return dump(finish(gen)); }

 private:
  json text_part(const std::string& text) const {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
  }
  json message_item(const std::string& text, bool done) const {
    return {{"type", "message"},
            {"id", item_id_},
            {"status", done ? "completed" : "in_progress"},
            {"role", "assistant"},
            {"content", done ? json::array({text_part(text)}) : json::array()}};
  }
  json response_object(const char* status, json incomplete, json output, json usage) const {
    json r = {{"id", id_},
              {"object", "response"},
              {"created_at", created_},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", std::move(incomplete)},
              {"model", model_},
              {"output", std::move(output)},
              {"parallel_tool_calls", true},
              {"tool_choice", "auto"},
              {"tools", json::array()},
              {"text", {{"format", {{"type", "text"}}}}},
              {"truncation", "disabled"},
              {"usage", std::move(usage)}};
    r.update(echo_);
    return r;
  }
  // The finished response object; stores it once.
  json finish(Generation& gen) {
    const json chat = gen.builder().response();
    model_ = chat.value("model", "");
    const json& choice = chat["choices"][0];
    const std::string text = choice["message"].value("content", "");
    const bool cut = choice.value("finish_reason", "") == "length";
    const json& u = chat["usage"];
    const json usage = {{"input_tokens", u["prompt_tokens"]},
                        {"input_tokens_details", {{"cached_tokens", 0}}},
                        {"output_tokens", u["completion_tokens"]},
                        {"output_tokens_details", {{"reasoning_tokens", 0}}},
                        {"total_tokens", u["total_tokens"]}};
    json r =
        response_object(cut ? "incomplete" : "completed", cut ? json{{"reason", "max_output_tokens"}} : json(nullptr),
                        json::array({message_item(text, true)}), usage);
    if (store_ && !stored_) {
      json conversation = conversation_;
      conversation.push_back({{"role", "assistant"}, {"content", text}});
      store_->put(id_, ResponseStore::Entry{r, std::move(conversation)});
      stored_ = true;
    }
    return r;
  }
  std::string event(json e) {
    e["sequence_number"] = sequence_++;
    return fmt::format("event: {}\ndata: {}\n\n", e["type"].get<std::string>(), dump(e));
  }

  std::string id_, item_id_, model_;
  int64_t created_;
  json conversation_;  // the messages before this response's output (instructions excluded)
  std::shared_ptr<ResponseStore> store_;
  json echo_ = json::object();  // request fields the response object repeats
  int sequence_ = 0;
  bool stored_ = false;
};

}  // namespace

ResponsesCall prepare_responses_call(const json& body, std::shared_ptr<ResponseStore> store) {
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  check_unsupported(body);
  json conversation = json::array();
  if (f::present(body, "previous_response_id")) {
    const std::string prev = f::get_string(body, "previous_response_id", "");
    if (!store || !store->enabled())
      bad_param("previous_response_id",
                "'previous_response_id' needs the response store: start the server with --max-stored-responses N");
    auto entry = store->get(prev);
    if (!entry)
      throw ApiError(404, fmt::format("Response with id '{}' not found (it was never stored, or was evicted)", prev),
                     "previous_response_id", "not_found_error");
    conversation = entry->messages;
  }
  for (json& m : input_messages(body)) conversation.push_back(std::move(m));
  json messages = json::array();
  if (f::present(body, "instructions")) {
    if (!body["instructions"].is_string()) bad_param("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  for (const json& m : conversation) messages.push_back(m);
  ResponsesCall call;
  call.chat_body = chat_body_of(body, std::move(messages));
  call.format = std::make_unique<ResponsesFormat>(body, std::move(conversation), std::move(store));
  return call;
}

}  // namespace gs
