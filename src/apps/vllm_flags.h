// vLLM command-line compatibility: a `vllm serve` launch line runs unchanged.
//
// - normalize_vllm_args: the spellings CLI11 cannot declare (-tp, -pp, -dp, -cc, ... multi-letter
//   short options; --max_model_len with underscores) become their long forms.
// - add_vllm_flags: every `vllm serve` flag graphserve has no setting of its own for, from one
//   table (docs/VLLM_FLAGS.md mirrors it). Each is either a documented no-op (accepted, one log
//   line says why it changes nothing here) or accepted only for the values graphserve can honour
//   (others are refused with the reason). A flag some other part of graphserve already declares
//   is skipped, so a real implementation always wins over its compatibility entry.
// - parse_human_int: vLLM's integer syntax (1k = 1000, 1K = 1024, 25.6k).
// - suggest_flag: "did you mean" for a misspelled flag.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "executor/engine_config.h"

namespace gs {

std::vector<std::string> normalize_vllm_args(std::vector<std::string> args);

// Adds the table's flags to `cmd` (call it after every other option is declared). The one-line
// notes of the flags given (what each does here) are appended to `notes`, for the command to log.
void add_vllm_flags(CLI::App& cmd, EngineConfig& cfg, std::vector<std::string>& notes);

// vLLM's human_readable_int: "32768", "32k" (x1000), "32K" (x1024), "25.6k"; decimals are not
// allowed with binary suffixes. Throws gs::Error naming `flag`.
long long parse_human_int(const std::string& text, const std::string& flag);

// The declared long option of `cmd` closest to `unknown` ("" when none is close).
std::string suggest_flag(const CLI::App& cmd, const std::string& unknown);

}  // namespace gs
