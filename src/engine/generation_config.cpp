// Implements engine/generation_config.h.
#include "engine/generation_config.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "model/json_file.h"

namespace gs {

SamplingParams load_sampling_defaults(const std::string& source, const std::string& model_dir) {
  namespace fs = std::filesystem;
  SamplingParams p;
  if (source == "vllm") return p;
  const fs::path dir = source == "auto" ? fs::path(model_dir) : fs::path(source);
  const fs::path file = dir / "generation_config.json";
  if (source == "auto" && (model_dir.empty() || !fs::exists(file))) return p;
  GS_CHECK(fs::exists(file),
           "--generation-config {}: no generation_config.json there (use auto, vllm or a "
           "directory that has one)",
           source);
  const nlohmann::json j = read_json_file(file);
  p.temperature = float(json_number(j, "temperature", p.temperature, file));
  p.top_p = float(json_number(j, "top_p", p.top_p, file));
  p.top_k = json_int(j, "top_k", p.top_k, file);
  p.min_p = float(json_number(j, "min_p", p.min_p, file));
  p.repetition_penalty = float(json_number(j, "repetition_penalty", p.repetition_penalty, file));
  // HF's do_sample=false means greedy unless the file also sets a temperature.
  if (!json_bool(j, "do_sample", true, file) && !j.contains("temperature")) p.temperature = 0.0f;
  try {
    p.validate(1 << 30);
  } catch (const Error& e) {
    fail("{}: {}", file.string(), e.what());
  }
  std::vector<std::string> set;
  for (const char* k : {"temperature", "top_p", "top_k", "min_p", "repetition_penalty"})
    if (j.contains(k) && !j[k].is_null()) set.push_back(fmt::format("{}={}", k, j[k].dump()));
  if (!set.empty())
    spdlog::info("default sampling parameters from {}: {} (requests that set them override them)", file.string(),
                 fmt::join(set, ", "));
  return p;
}

}  // namespace gs
