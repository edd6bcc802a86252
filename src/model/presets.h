// Built-in model shapes for dummy weights: real architectures' configs, plus tiny ones for tests.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace gs {

struct Preset {
  std::string name;
  std::string description;
  ModelConfig config;
};

const std::vector<Preset>& builtin_presets();
// DeepSeek-V2-Lite's config.json through the config parser (model/deepseek_config.cpp).
ModelConfig deepseek_v2_lite_config();
// The preset called `name`; throws gs::Error listing the valid names when there is none.
const Preset& find_preset(const std::string& name);

}  // namespace gs
