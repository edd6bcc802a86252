// Hostile model directories and adapters: non-finite weights (F32, F16, BF16) and LoRA scales,
// config integers far out of range, a huge layer index in a tensor name, and index shards that
// leave the model directory are each refused with an error naming the tensor, field or file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/lora_test_util.h"
#include "load_util.h"
#include "model/lora_adapter.h"
#include "model/safetensors.h"

namespace gs {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

void set_f32(test::StTensor& t, size_t i, float v) { std::memcpy(t.bytes.data() + 4 * i, &v, 4); }

TEST(LoadHardening, NonFiniteModelWeightNamesTheTensor) {
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    TempDir d;
    test::write_model(d.path(), [&](auto& ts) {
      for (auto& t : ts)
        if (t.name == "model.layers.1.mlp.up_proj.weight") set_f32(t, 7, bad);
    });
    EXPECT_ERROR_HAS(test::load_error(d.path()), "model.layers.1.mlp.up_proj.weight", "non-finite", "element 7");
  }
}

TEST(LoadHardening, FirstNonFiniteEveryDtype) {
  const uint16_t f16[] = {0x3C00, 0x7C00}, bf16[] = {0x3F80, 0x7FC0}, f16_ok[] = {0x7BFF, 0xFBFF};
  EXPECT_EQ(first_non_finite(f16, DType::F16, 2), 1);
  EXPECT_EQ(first_non_finite(bf16, DType::BF16, 2), 1);
  EXPECT_EQ(first_non_finite(f16_ok, DType::F16, 2), -1);  // the largest finite halves
  const float f32[] = {1.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(first_non_finite(f32, DType::F32, 2), -1);
  EXPECT_EQ(first_non_finite(f32, DType::F32, 3), 2);
}

TEST(LoadHardening, ConfigIntegersOutOfRange) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, int64_t>>{{"max_position_embeddings", 2147483647},
                                                                               {"vocab_size", 2000000000},
                                                                               {"hidden_size", 1 << 20},
                                                                               {"num_hidden_layers", 100000},
                                                                               {"head_dim", 1 << 20}}) {
    TempDir d;
    test::write_model(d.path(), [](auto&) {});
    test::edit_config(d.path(), key, value);
    EXPECT_ERROR_HAS(test::load_error(d.path()), "config.json", key.c_str(), "outside");
  }
}

TEST(LoadHardening, IndexShardsStayInTheModelDirectory) {
  for (const char* shard : {"../../../../etc/passwd", "/etc/passwd", "sub/../../x.safetensors"}) {
    TempDir d;
    test::copy_configs(test::stories260k_dir(), d.path());
    test::write_text(d.path() / "model.safetensors.index.json",
                     nlohmann::json{{"weight_map", {{"model.norm.weight", shard}}}}.dump());
    EXPECT_ERROR_HAS(test::load_error(d.path()), "model.safetensors.index.json", shard, "inside the model directory");
  }
}

class AdapterHardening : public ::testing::Test {
 protected:
  TempDir tmp;
  ModelConfig cfg = load_model_config(test::stories260k_dir());
  std::string error_of(const fs::path& dir) {
    try {
      load_lora_adapter("x", dir, cfg, 16);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(AdapterHardening, NonFiniteWeightNamesTheTensor) {
  const fs::path dir = tmp.path() / "nan";
  test::write_adapter(dir, test::AdapterSpec{.targets = {"q_proj"}}, 1);
  const std::string name = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
  const auto B = test::f32_tensor(name, {64, 4}, std::vector<float>(256, std::nanf("")));
  const auto A = test::f32_tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", {4, 64},
                                  std::vector<float>(256, 0.1f));
  test::write_safetensors(dir / "adapter_model.safetensors", {A, B});
  EXPECT_ERROR_HAS(error_of(dir), name.c_str(), "non-finite");
}

TEST_F(AdapterHardening, HugeAlphaIsRefused) {
  const fs::path dir = tmp.path() / "alpha";
  test::write_adapter(dir, test::AdapterSpec{.alpha = 1e308});
  EXPECT_ERROR_HAS(error_of(dir), "adapter_config.json", "lora_alpha", "1e+308");
}

TEST_F(AdapterHardening, HugeLayerIndexIsAClearError) {
  const fs::path dir = tmp.path() / "layer";
  test::write_adapter(dir, test::AdapterSpec{.targets = {"q_proj"}}, 1);
  const auto A = test::f32_tensor("base_model.model.model.layers.99999999999999999999.self_attn.q_proj.lora_A.weight",
                                  {4, 64}, std::vector<float>(256, 0.1f));
  test::write_safetensors(dir / "adapter_model.safetensors", {A});
  EXPECT_ERROR_HAS(error_of(dir), "names layer 99999999999999999999", "the model has 5");
}

}  // namespace
}  // namespace gs
