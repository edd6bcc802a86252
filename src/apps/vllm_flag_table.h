// The table of `vllm serve` flags graphserve accepts without a setting of its own (see
// apps/vllm_flags.h). `graphserve info --vllm-flags` prints it; docs/VLLM_FLAGS.md carries it.
#pragma once
#include <string>
#include <vector>

namespace gs {

enum class FlagArity {
  Switch,  // --x, and its negation --no-x (vLLM's BooleanOptionalAction)
  Value,   // --x VALUE
  Values,  // --x V1 [V2 ...]
};

struct VllmFlag {
  std::string names;  // CLI11 spelling: "--pipeline-parallel-size,-pp" (short forms via normalize_vllm_args)
  FlagArity arity = FlagArity::Value;
  std::string example;  // a value the flag accepts (the table-driven test passes it)
  std::string note;     // what the flag does in graphserve (logged once when given)
  // Values honoured; empty: any value. Others are refused with `refusal` (or with refuse()).
  std::vector<std::string> accepted;
  std::string refusal;
  std::string (*refuse)(const std::string& value) = nullptr;  // "" when the value is honoured

  std::string long_name() const;  // "--pipeline-parallel-size"
  // "" when `value` is honoured, else the error message.
  std::string check(const std::string& value) const;
  bool is_noop() const { return accepted.empty() && refusal.empty() && !refuse; }
};

const std::vector<VllmFlag>& vllm_flag_table();

// The table as Markdown rows (| flag | status | what it does |) and as JSON (for the tests).
std::string vllm_flag_table_markdown();
std::string vllm_flag_table_json();

}  // namespace gs
