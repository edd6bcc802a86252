// PEFT adapter loading: a valid adapter's fields and tensors, and malformed adapters refused
// with an error naming the file and the field (or tensor) at fault; a tensor-parallel rank's
// shard of an adapter is its base weight shard's part of the delta B A.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/lora_test_util.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "model/tp_layout.h"
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

// scale-free delta B A [out, in] of one (A, B) pair of rank r (in double).
std::vector<double> delta(const LoraMatrices& m, int r, int64_t out, int64_t in) {
  std::vector<double> d(size_t(out * in), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      for (int k = 0; k < r; ++k) d[size_t(o * in + i)] += double(m.b[size_t(o * r + k)]) * m.a[size_t(k * in + i)];
  return d;
}

// Each rank's (A_r, B_r) of every target is the whole adapter's delta restricted to that rank's
// base weight shard: rows [begin, begin + count) of q/k/v/gate/up (their lora_A whole), columns
// of o/down (their lora_B whole), so the ranks' row-parallel deltas add up to the whole one. At 8
// ranks over 4 KV heads each KV head's rows go to two ranks (replicated, as the base weights).
TEST_F(LoraAdapterLoad, TensorParallelShardsAreTheBaseWeightShardsPartOfTheDelta) {
  ModelConfig model = cfg;
  model.intermediate_size = 176;  // divisible by 8 (stories260K's 172 splits over 2 and 4 ranks)
  const int rank = 3;
  test::write_adapter(tmp.path() / "a", AdapterSpec{.rank = rank, .alpha = 6}, 2, model);
  const LoraAdapter full = load_lora_adapter("a", tmp.path() / "a", model, 16);
  for (int size : {2, 4, 8}) {
    std::vector<std::vector<double>> row_parallel_sum(2);  // o, down of layer 1, summed over ranks
    for (int r = 0; r < size; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(size));
      const TpLayout tp = make_tp_layout(model, r, size);
      const LoraAdapter part = shard_lora_adapter(full, model, tp);
      EXPECT_EQ(part.rank, rank);
      EXPECT_EQ(part.scale, full.scale);
      for (int t = 0; t < kNumLoraTargets; ++t) {
        const LoraTarget target = LoraTarget(t);
        SCOPED_TRACE(lora_target_module(target));
        const auto [out, in] = lora_target_shape(model, target);
        const auto [lout, lin] = lora_target_shape(tp.local, target);
        const LoraMatrices& w = *full.layers[1][size_t(t)];
        const LoraMatrices& p = *part.layers[1][size_t(t)];
        ASSERT_EQ(p.a.size(), size_t(rank * lin));
        ASSERT_EQ(p.b.size(), size_t(lout * rank));
        const bool column = target != LoraTarget::O && target != LoraTarget::Down;
        // The first row (column) of the rank's base weight shard, as the model's loader cuts it.
        const int64_t begin = target == LoraTarget::Q || target == LoraTarget::O ? int64_t(r) * model.q_size() / size
                              : target == LoraTarget::K || target == LoraTarget::V
                                  ? int64_t(r * model.num_kv_heads / size) * model.head_dim
                                  : int64_t(r) * model.intermediate_size / size;
        const TpRange range{begin, column ? lout : lin};
        const std::vector<double> whole = delta(w, rank, out, in), mine = delta(p, rank, lout, lin);
        for (int64_t o = 0; o < lout; ++o)
          for (int64_t i = 0; i < lin; ++i) {
            const int64_t fo = column ? range.begin + o : o, fi = column ? i : range.begin + i;
            ASSERT_NEAR(mine[size_t(o * lin + i)], whole[size_t(fo * in + fi)], 1e-12) << o << ", " << i;
          }
        if (column) {
          EXPECT_EQ(p.a, w.a) << "a column-parallel rank keeps lora_A whole";
        } else {
          EXPECT_EQ(p.b, w.b) << "a row-parallel rank keeps lora_B whole";
          std::vector<double>& sum = row_parallel_sum[target == LoraTarget::O ? 0 : 1];
          sum.resize(size_t(out * in), 0.0);
          for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < lin; ++i) sum[size_t(o * in + range.begin + i)] += mine[size_t(o * lin + i)];
        }
      }
    }
    for (int k = 0; k < 2; ++k) {  // every input column of o and down is some rank's, once
      const LoraTarget target = k == 0 ? LoraTarget::O : LoraTarget::Down;
      const auto [out, in] = lora_target_shape(model, target);
      const std::vector<double> whole = delta(*full.layers[1][size_t(target)], rank, out, in);
      ASSERT_EQ(row_parallel_sum[size_t(k)].size(), whole.size());
      for (size_t e = 0; e < whole.size(); ++e) ASSERT_NEAR(row_parallel_sum[size_t(k)][e], whole[e], 1e-12);
    }
  }
  EXPECT_EQ(shard_lora_adapter(full, model, make_tp_layout(model, 0, 1)).layers[1][0]->b, full.layers[1][0]->b);
}

}  // namespace
}  // namespace gs
