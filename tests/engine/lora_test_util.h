// Test helpers for LoRA: random PEFT adapters for stories260K (or another model's config) written
// to disk, and the model directory with an adapter merged offline into its weights
// (W + scale * B A), the reference.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/checkpoint_writer.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "test_paths.h"

namespace gs::test {

struct AdapterSpec {
  int rank = 4;
  double alpha = 8.0;
  bool rslora = false;
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  uint32_t seed = 1;
  float a_range = 0.3f, b_range = 0.3f;
  double scale() const { return rslora ? alpha / std::sqrt(double(rank)) : alpha / rank; }
};

// The model a helper writes for: stories260K unless given.
inline ModelConfig stories_model_config() { return load_model_config(stories260k_dir()); }

// (out, in) of projection `t` ("q_proj", ...) of `cfg`; down's for a name that is no target (an
// adapter the loader must refuse).
inline std::pair<int64_t, int64_t> target_shape(const ModelConfig& cfg, const std::string& t) {
  for (int i = 0; i < kNumLoraTargets; ++i)
    if (t == lora_target_module(LoraTarget(i))) return lora_target_shape(cfg, LoraTarget(i));
  return lora_target_shape(cfg, LoraTarget::Down);
}
inline std::string module_of(const std::string& t) {
  return (t == "gate_proj" || t == "up_proj" || t == "down_proj" ? "mlp." : "self_attn.") + t;
}

inline StTensor f32_tensor(const std::string& name, Shape shape, const std::vector<float>& v) {
  StTensor t{name, "F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// The adapter's (A, B) per "layer.target", as written.
using AdapterWeights = std::map<std::string, std::pair<std::vector<float>, std::vector<float>>>;

// An adapter of s.targets on the first `layers` layers of `cfg`.
inline AdapterWeights write_adapter(const std::filesystem::path& dir, const AdapterSpec& s, int layers = 5,
                                    const ModelConfig& model = stories_model_config()) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"peft_type", "LORA"},
                        {"r", s.rank},
                        {"lora_alpha", s.alpha},
                        {"target_modules", s.targets},
                        {"use_rslora", s.rslora},
                        {"bias", "none"},
                        {"base_model_name_or_path", "stories260K"}};
  std::ofstream(dir / "adapter_config.json") << cfg.dump(2);
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<float> ua(-s.a_range, s.a_range), ub(-s.b_range, s.b_range);
  AdapterWeights w;
  std::vector<StTensor> ts;
  for (int l = 0; l < layers; ++l)
    for (const auto& t : s.targets) {
      const auto [out, in] = target_shape(model, t);
      std::vector<float> a(size_t(s.rank * in)), b(size_t(out * s.rank));
      for (float& x : a) x = ua(rng);
      for (float& x : b) x = ub(rng);
      const std::string p = "base_model.model.model.layers." + std::to_string(l) + "." + module_of(t);
      ts.push_back(f32_tensor(p + ".lora_A.weight", {int64_t(s.rank), in}, a));
      ts.push_back(f32_tensor(p + ".lora_B.weight", {out, int64_t(s.rank)}, b));
      w[std::to_string(l) + "." + t] = {std::move(a), std::move(b)};
    }
  write_safetensors(dir / "adapter_model.safetensors", ts);
  return w;
}

// A copy of the model in `base` with the adapter merged: W += scale * B A (in double).
inline void write_merged(const std::filesystem::path& base, const std::filesystem::path& dir, const AdapterSpec& s,
                         const AdapterWeights& w, const ModelConfig& cfg = stories_model_config()) {
  std::filesystem::create_directories(dir);
  std::vector<StTensor> ts = read_tensors(base);
  for (auto& t : ts)
    for (const auto& [key, ab] : w) {
      const std::string layer = key.substr(0, key.find('.')), target = key.substr(key.find('.') + 1);
      if (t.name != "model.layers." + layer + "." + module_of(target) + ".weight") continue;
      const auto [out, in] = target_shape(cfg, target);
      float* W = reinterpret_cast<float*>(t.bytes.data());
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
          double d = 0;
          for (int r = 0; r < s.rank; ++r)
            d += double(ab.second[size_t(o * s.rank + r)]) * ab.first[size_t(r * in + i)];
          W[o * in + i] += float(s.scale() * d);
        }
    }
  write_safetensors(dir / "model.safetensors", ts);
  copy_configs(base, dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(base / f, dir / f, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace gs::test
