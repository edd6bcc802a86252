// PEFT adapter loading: a valid adapter's fields and tensors, and malformed adapters refused
// with an error naming the file and the field (or tensor) at fault.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/lora_test_util.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "test_paths.h"

namespace gs {
namespace {

using test::AdapterSpec;

class LoraAdapterLoad : public ::testing::Test {
 protected:
  test::TempDir tmp;
  ModelConfig cfg = load_model_config(test::stories260k_dir());

  // The error message of loading `dir` (fails the test when it loads).
  std::string error_of(const std::filesystem::path& dir, int max_rank = 16) {
    try {
      load_lora_adapter("x", dir, cfg, max_rank);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << dir << " should fail";
    return "";
  }
  void patch_config(const std::filesystem::path& dir, const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(std::ifstream(dir / "adapter_config.json"));
    j[key] = value;
    std::ofstream(dir / "adapter_config.json") << j.dump();
  }
};

TEST_F(LoraAdapterLoad, ReadsRankScaleAndEveryTarget) {
  const auto w = test::write_adapter(tmp.path() / "a", AdapterSpec{.rank = 4, .alpha = 8});
  const LoraAdapter ad = load_lora_adapter("a", tmp.path() / "a", cfg, 16);
  EXPECT_EQ(ad.rank, 4);
  EXPECT_FLOAT_EQ(ad.scale, 2.0f);
  ASSERT_EQ(ad.layers.size(), 5u);
  const auto& down = ad.layers[3][size_t(LoraTarget::Down)];
  ASSERT_TRUE(down);
  EXPECT_EQ(down->a, w.at("3.down_proj").first);
  EXPECT_EQ(down->b, w.at("3.down_proj").second);
  test::write_adapter(tmp.path() / "rs", AdapterSpec{.rank = 4, .alpha = 8, .rslora = true, .targets = {"q_proj"}});
  const LoraAdapter rs = load_lora_adapter("rs", tmp.path() / "rs", cfg, 16);
  EXPECT_FLOAT_EQ(rs.scale, 4.0f);
  EXPECT_FALSE(rs.layers[0][size_t(LoraTarget::K)]);
}

TEST_F(LoraAdapterLoad, RefusesRankAboveMaximum) {
  test::write_adapter(tmp.path() / "a", AdapterSpec{.rank = 8});
  const std::string e = error_of(tmp.path() / "a", 4);
  EXPECT_NE(e.find("adapter_config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'r'"), std::string::npos) << e;
}

TEST_F(LoraAdapterLoad, RefusesUnknownTargetModule) {
  test::write_adapter(tmp.path() / "a", AdapterSpec{});
  patch_config(tmp.path() / "a", "target_modules", {"q_proj", "embed_tokens"});
  const std::string e = error_of(tmp.path() / "a");
  EXPECT_NE(e.find("target_modules"), std::string::npos) << e;
  EXPECT_NE(e.find("embed_tokens"), std::string::npos) << e;
}

TEST_F(LoraAdapterLoad, RefusesShapeMismatch) {
  test::write_adapter(tmp.path() / "a", AdapterSpec{.rank = 4});
  patch_config(tmp.path() / "a", "r", 2);  // the tensors hold rank 4
  const std::string e = error_of(tmp.path() / "a");
  EXPECT_NE(e.find("adapter_model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("lora_A.weight"), std::string::npos) << e;
}

TEST_F(LoraAdapterLoad, RefusesMissingFilesAndFields) {
  EXPECT_NE(error_of(tmp.path() / "none").find("adapter_config.json"), std::string::npos);
  test::write_adapter(tmp.path() / "a", AdapterSpec{});
  std::filesystem::remove(tmp.path() / "a" / "adapter_model.safetensors");
  EXPECT_NE(error_of(tmp.path() / "a").find("adapter_model.safetensors"), std::string::npos);
  test::write_adapter(tmp.path() / "b", AdapterSpec{});
  auto j = nlohmann::json::parse(std::ifstream(tmp.path() / "b" / "adapter_config.json"));
  j.erase("r");
  std::ofstream(tmp.path() / "b" / "adapter_config.json") << j.dump();
  const std::string e = error_of(tmp.path() / "b");
  EXPECT_NE(e.find("'r'"), std::string::npos) << e;
}

TEST_F(LoraAdapterLoad, RefusesTensorOfUnlistedTarget) {
  test::write_adapter(tmp.path() / "a", AdapterSpec{.targets = {"q_proj", "v_proj"}});
  patch_config(tmp.path() / "a", "target_modules", {"q_proj"});
  const std::string e = error_of(tmp.path() / "a");
  EXPECT_NE(e.find("v_proj"), std::string::npos) << e;
}

}  // namespace
}  // namespace gs
