// Tool calling and reasoning output, as vLLM serves them.
//
// tool_choice: "none" (tools only reach the template), "auto" (with --enable-auto-tool-choice
// and --tool-call-parser: the model's text is parsed for tool calls), "required" (the output is
// constrained to a JSON list of calls of the given tools, each call's arguments validating
// against its function's parameters) or {"type":"function","function":{"name":...}} (the output
// is constrained to that function's arguments). Parsers: hermes (<tool_call>{json}</tool_call>),
// llama3_json ({"name", "parameters"} objects, ';'-separated, optional <|python_tag|>), mistral
// ([TOOL_CALLS][{"name", "arguments"}]) and pythonic ([f(a=1, b="x"), ...]).
// --reasoning-parser deepseek_r1 | qwen3 moves the text before </think> into reasoning_content.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_client.h"

namespace gs {

struct GenerationRequest;

// The server's flags (--enable-auto-tool-choice, --tool-call-parser, --reasoning-parser).
struct ChatOutputFlags {
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // "" or one of tool_call_parsers()
  std::string reasoning_parser;  // "" or deepseek_r1 | qwen3
};
const std::vector<std::string>& tool_call_parsers();
const std::vector<std::string>& reasoning_parsers();
// Throws gs::Error naming the flag for an unknown parser or auto choice without a parser.
void validate(const ChatOutputFlags& f);

// How one chat request's output is read.
struct ChatOutputOptions {
  enum class Tools { kNone, kAuto, kRequired, kNamed };
  Tools tools = Tools::kNone;
  std::string named_function;  // kNamed
  std::string tool_parser;     // kAuto
  std::string reasoning_parser;
  bool active() const { return tools != Tools::kNone || !reasoning_parser.empty(); }
};

// Reads tool_choice / tools / parallel_tool_calls of a chat body into req.chat_output and, for
// required / named choices, constrains req.params (compiled through `client`). Throws ApiError(400).
void apply_tool_choice(const nlohmann::ordered_json& body, const ChatOutputFlags& flags, const EngineClient& client,
                       GenerationRequest& req);
// With a reasoning parser, a constrained request's grammar waits for the model's </think> token
// (unless the prompt already holds it), so the reasoning is free and the answer follows the
// constraint. Called by apply_tool_choice.
void wait_for_reasoning_end(const EngineClient& client, GenerationRequest& req);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text
};
struct ParsedOutput {
  std::string content;  // what is left for "content"
  std::vector<ToolCall> calls;
};
// Parses a whole output with `parser` (a tool_call_parsers() name): the final scan of
// server/tool_call_scan.h, so it equals what ChatOutputStream streams. Text with no call that does
// not parse stays content.
ParsedOutput parse_tool_calls(const std::string& parser, const std::string& text);

// Splits reasoning from content; nullopt reasoning when the parser finds none.
struct ReasoningSplit {
  std::optional<std::string> reasoning;
  std::string content;
};
ReasoningSplit split_reasoning(const std::string& parser, const std::string& text);

struct ChatOutputView;

// One choice's streamed chat output: feed() returns the deltas to send now, in order
// ({"content": ...} and/or {"reasoning_content": ...}, and tool_calls entries; often one, possibly
// none), holding back text that may start a marker or belongs to a tool call; finish() returns the
// rest and whether the output holds calls. Tool calls stream as OpenAI's do, for every tool_choice
// and parser: once a call's name is known, one delta opens it ({index, id, type: "function",
// function: {name, arguments: ""}}), then deltas carry each new fragment of its arguments
// ({index, function: {arguments}}); the fragments add up to the non-streamed arguments.
class ChatOutputStream {
 public:
  explicit ChatOutputStream(ChatOutputOptions opts) : opts_(std::move(opts)) {}
  std::vector<nlohmann::ordered_json> feed(const std::string& text);
  std::vector<nlohmann::ordered_json> finish(bool& has_calls);
  // The whole message for a non-streamed response (content, reasoning_content, tool_calls).
  static nlohmann::ordered_json message(const ChatOutputOptions& opts, const std::string& text, bool& has_calls);

 private:
  std::vector<nlohmann::ordered_json> send(const ChatOutputView& v, bool final);

  ChatOutputOptions opts_;
  std::string all_;  // every text fed
  size_t sent_reasoning_ = 0, sent_content_ = 0;
  std::vector<size_t> sent_arguments_;  // per opened call: the bytes of its arguments sent
};

}  // namespace gs
