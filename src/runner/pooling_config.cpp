// Implements model/pooling_config.h.
#include "runner/pooling_config.h"

#include <filesystem>

#include "core/error.h"
#include "model/json_file.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

// The pooling mode of a sentence-transformers Pooling module's config.json.
Pooling pooling_of(const fs::path& file) {
  const nlohmann::json j = read_json_file(file);
  if (json_bool(j, "pooling_mode_lasttoken", false, file)) return Pooling::Last;
  if (json_bool(j, "pooling_mode_mean_tokens", false, file)) return Pooling::Mean;
  for (const char* other : {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_weightedmean_tokens",
                            "pooling_mode_mean_sqrt_len_tokens"})
    GS_CHECK(!json_bool(j, other, false, file), "{}: {} is not supported (last-token and mean pooling are)",
             file.string(), other);
  fail("{}: no pooling mode set (pooling_mode_lasttoken or pooling_mode_mean_tokens)", file.string());
}

}  // namespace

PoolingConfig load_pooling_config(const std::string& model_dir) {
  PoolingConfig cfg;
  if (model_dir.empty()) return cfg;
  const fs::path dir(model_dir);
  if (fs::exists(dir / "modules.json")) {
    const nlohmann::json modules = read_json_file(dir / "modules.json");
    GS_CHECK(modules.is_array(), "{}: expected a list of modules", (dir / "modules.json").string());
    for (const nlohmann::json& m : modules)
      if (m.is_object() && m.value("type", "") == "sentence_transformers.models.Pooling")
        cfg.type = pooling_of(dir / m.value("path", "1_Pooling") / "config.json");
  }
  if (fs::exists(dir / "config.json")) {
    const fs::path file = dir / "config.json";
    const nlohmann::json c = read_json_file(file);
    if (c.contains("matryoshka_dimensions") && c["matryoshka_dimensions"].is_array()) {
      cfg.matryoshka = true;
      for (const nlohmann::json& d : c["matryoshka_dimensions"])
        if (d.is_number_integer()) cfg.matryoshka_dims.push_back(d.get<int>());
    }
    cfg.matryoshka = cfg.matryoshka || json_bool(c, "is_matryoshka", false, file);
  }
  return cfg;
}

}  // namespace gs
