// Implements server/tool_calls.h: tool_choice, the tool-call parsers and reasoning splitting.
#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/structured_request.h"

namespace gs {

using Json = nlohmann::ordered_json;
using Tools = ChatOutputOptions::Tools;

const std::vector<std::string>& tool_call_parsers() {
  static const std::vector<std::string> p = {"hermes", "llama3_json", "mistral", "pythonic"};
  return p;
}
const std::vector<std::string>& reasoning_parsers() {
  static const std::vector<std::string> p = {"deepseek_r1", "qwen3"};
  return p;
}

namespace {

bool one_of(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void validate(const ChatOutputFlags& f) {
  GS_CHECK(f.tool_call_parser.empty() || one_of(tool_call_parsers(), f.tool_call_parser),
           "--tool-call-parser '{}' is not supported (supported: {})", f.tool_call_parser, joined(tool_call_parsers()));
  GS_CHECK(f.reasoning_parser.empty() || one_of(reasoning_parsers(), f.reasoning_parser),
           "--reasoning-parser '{}' is not supported (supported: {})", f.reasoning_parser, joined(reasoning_parsers()));
  GS_CHECK(!f.enable_auto_tool_choice || !f.tool_call_parser.empty(),
           "--enable-auto-tool-choice needs --tool-call-parser ({})", joined(tool_call_parsers()));
}

namespace {

const Json* find_tool(const Json& tools, const std::string& name) {
  for (const auto& t : tools)
    if (t.contains("function") && t["function"].value("name", "") == name) return &t;
  return nullptr;
}

Json parameters_of(const Json& tool) {
  const Json& f = tool["function"];
  if (f.contains("parameters") && !f["parameters"].is_null()) return f["parameters"];
  return Json{{"type", "object"}, {"properties", Json::object()}};
}

}  // namespace

void apply_tool_choice(const Json& body, const ChatOutputFlags& flags, const EngineClient& client,
                       GenerationRequest& req) {
  req.chat_output.reasoning_parser = flags.reasoning_parser;
  const Json tools = body.contains("tools") && body["tools"].is_array() ? body["tools"] : Json::array();
  for (size_t i = 0; i < tools.size(); ++i)
    if (!tools[i].is_object() || !tools[i].contains("function") || !tools[i]["function"].is_object() ||
        !tools[i]["function"].contains("name") || !tools[i]["function"]["name"].is_string())
      throw ApiError(400,
                     fmt::format("tools[{}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", i),
                     "tools");
  const Json tc = body.contains("tool_choice") ? body["tool_choice"] : Json();
  const bool parallel = !body.contains("parallel_tool_calls") || body["parallel_tool_calls"] != false;
  auto needs_tools = [&](const char* what) {
    if (tools.empty())
      throw ApiError(400, fmt::format("tool_choice {} needs a non-empty 'tools'", what), "tool_choice");
  };
  StructuredField field{"tool_choice", {}};
  field.spec.kind = structured::ConstraintSpec::Kind::kJsonSchema;
  if (tc.is_null() || tc == "none") {
    if (tc.is_null() && !tools.empty() && flags.enable_auto_tool_choice) req.chat_output.tools = Tools::kAuto;
  } else if (tc == "auto") {
    if (!flags.enable_auto_tool_choice)
      throw ApiError(400, "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                     "tool_choice");
    req.chat_output.tools = Tools::kAuto;
  } else if (tc == "required") {
    needs_tools("\"required\"");
    Json any = Json::array();
    for (const auto& t : tools)
      any.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", t["function"]["name"]}}}, {"parameters", parameters_of(t)}}},
                     {"required", {"name", "parameters"}},
                     {"additionalProperties", false}});
    Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any}}}};
    if (!parallel) schema["maxItems"] = 1;
    field.spec.text = schema.dump();
    req.chat_output.tools = Tools::kRequired;
  } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
             tc["function"].is_object() && tc["function"].contains("name")) {
    needs_tools("naming a function");
    const std::string name = tc["function"]["name"].get<std::string>();
    const Json* tool = find_tool(tools, name);
    if (!tool)
      throw ApiError(400, fmt::format("tool_choice names function '{}', which is not in 'tools'", name), "tool_choice");
    field.spec.text = parameters_of(*tool).dump();
    req.chat_output.tools = Tools::kNamed;
    req.chat_output.named_function = name;
  } else {
    throw ApiError(400,
                   "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                   "{\"name\": ...}}",
                   "tool_choice");
  }
  if (req.chat_output.tools == Tools::kAuto) {
    req.chat_output.tool_parser = flags.tool_call_parser;
    if (flags.tool_call_parser == "mistral") req.params.skip_special_tokens = false;  // [TOOL_CALLS] is special
  }
  if (req.chat_output.tools == Tools::kRequired || req.chat_output.tools == Tools::kNamed) {
    if (req.params.grammar)
      throw ApiError(400, "a \"required\" or named tool_choice cannot be combined with another output constraint",
                     "tool_choice");
    apply_structured_field(field, client, req.params);
  }
  wait_for_reasoning_end(client, req);
}

void wait_for_reasoning_end(const EngineClient& client, GenerationRequest& req) {
  if (req.chat_output.reasoning_parser.empty() || !req.params.grammar) return;
  const std::vector<int32_t> end = client.encode("</think>", false);
  if (end.size() != 1) return;  // the model has no </think> token: nothing to wait for
  // As vLLM: a prompt that already holds the end (Qwen3's template with enable_thinking false
  // writes an empty <think></think>) means the reasoning is over.
  for (const auto& prompt : req.prompts)
    if (std::find(prompt.begin(), prompt.end(), end[0]) != prompt.end()) return;
  req.params.grammar_after_token = end[0];
}

}  // namespace gs
