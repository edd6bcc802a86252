// Who may change the served LoRA adapters over HTTP, and from where.
//
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter exist only when the operator opts in, as
// vLLM has it: VLLM_ALLOW_RUNTIME_LORA_UPDATING=true (or 1), or --allow-runtime-lora-updating.
// Without it they answer 404 like any unknown route, before the body is read. With it:
//  - adapters served at start-up (--lora-modules) are the operator's: they cannot be unloaded or
//    replaced over the API (403);
//  - a lora_path must resolve, with every symbolic link followed, to a directory inside one of the
//    allowed roots (--lora-dir; by default the directories holding the --lora-modules adapters; with
//    neither, every path is refused), and so must the two files read from it;
//  - what the client learns about a refused path or a malformed adapter is one fixed sentence: never
//    whether the path exists, nor a file's bytes or size. The server log keeps the detail.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"

namespace gs {

struct LoraRoutePolicy {
  bool allow_runtime_updating = false;
  std::vector<std::string> roots;  // directories run-time adapters must live in
};

// vLLM's reading of VLLM_ALLOW_RUNTIME_LORA_UPDATING: "true" or "1", any case, spaces trimmed.
bool runtime_lora_switch_on(std::string_view env_value);

// The longest LoRA or served-model name, in bytes.
inline constexpr size_t kMaxModelNameBytes = 256;
// Throws ApiError 400 (param `param`) unless `name` is 1..kMaxModelNameBytes bytes of ASCII
// letters, digits and . _ - / : @ + = (what Hugging Face repository ids and adapter names use).
void check_model_name(std::string_view name, const char* param);
// The same check for names the operator gives; "" when valid, else the reason.
std::string model_name_problem(std::string_view name);

// `text` made safe for one log line: control bytes and quotes escaped as \xNN, cut at 512 bytes.
std::string log_safe(std::string_view text);

// The canonical adapter directory `path` names when it and its adapter_config.json and
// adapter_model.safetensors resolve inside one of `roots`; else nullopt with the reason in `why`
// (for the log only).
std::optional<std::filesystem::path> resolve_adapter_dir(const std::string& path, const std::vector<std::string>& roots,
                                                         std::string& why);

// What a client is told when adapter `name` is not loaded for a reason of its path or its files
// (400, param lora_path): the same sentence whatever the reason.
[[noreturn]] void refuse_lora_path(const std::string& name);

}  // namespace gs
