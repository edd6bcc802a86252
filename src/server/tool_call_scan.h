// Incremental reading of a model's tool-call text, shared by the whole (non-streamed) parse and
// the streamed one, so the two agree by construction.
//
// A scan reads the text produced so far and reports what is already certain: how much of it is
// plain content, and the calls whose name is complete, each with the part of its arguments that
// later text can only extend. Streaming sends the difference between successive scans (a call's
// opening once its name is known, then each new piece of its arguments); the whole parse is the
// final scan. Arguments given as a JSON object or array are the model's own text of that value,
// so they stream byte by byte; a string value (JSON encoded in a string) or a scalar is known only
// when it ends; pythonic calls' keyword arguments become a compact JSON object, one argument at a
// time.
#pragma once
#include <string>
#include <vector>

namespace gs {

struct CallScan {
  std::string name;
  bool has_name = false;  // the name is complete
  std::string arguments;  // the arguments so far: later text only appends to them
  bool done = false;      // the call ended: its arguments are whole
};

struct ToolScan {
  size_t content_end = 0;       // text[0, content_end) is content for sure
  std::vector<CallScan> calls;  // in order; each has_name, only the last may be open
  bool complete = false;        // the text is well formed up to its end
};
// The whole parse (parse_tool_calls) is the final scan: its calls, each with the arguments it has
// (a call cut short, or followed by text that is not well formed, stays: streaming sent it), and
// the content before them; a text with no call that is not well formed is all content.

// The reading of `text` by a parser of tool_call_parsers(); `final`: `text` is the whole output
// (nothing is held back as a possible start of a marker or a longer number).
ToolScan scan_tool_calls(const std::string& parser, const std::string& text, bool final);
// The output of a "required" tool_choice: [{"name": ..., "parameters": {...}}, ...].
ToolScan scan_required_calls(const std::string& text, bool final);

// The parsers (tool_call_scan.cpp: the JSON ones; tool_call_parsers.cpp: pythonic).
ToolScan scan_hermes(const std::string& text, bool final);       // <tool_call>{json}</tool_call>...
ToolScan scan_llama3_json(const std::string& text, bool final);  // [<|python_tag|>]{json}; {json}
ToolScan scan_mistral(const std::string& text, bool final);      // [TOOL_CALLS][{json}, ...]
ToolScan scan_pythonic(const std::string& text, bool final);     // [f(a=1, b="x"), g()]

// Length of the longest suffix of `s` that is a proper prefix of `marker` (held back while
// streaming: the marker may be arriving).
size_t marker_holdback(const std::string& s, const std::string& marker);

}  // namespace gs
