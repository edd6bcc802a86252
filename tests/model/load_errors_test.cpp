// Every way a model directory can be wrong gives a gs::Error naming the file and the problem;
// sharded and half-precision checkpoints load to the same model.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <tuple>

#include "checkpoint_writer.h"
#include "load_util.h"
#include "model_harness.h"
#include "test_paths.h"

namespace gs {
namespace {

namespace fs = std::filesystem;
using test::dir_source;
using test::edit_config;
using test::load_error;
using test::StTensor;
using test::TempDir;
using test::write_model;
using test::write_text;

TEST(ModelLoad, UnchangedCopyLoads) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  EXPECT_EQ(load_error(d.path()), "");
}

TEST(ModelLoad, MissingDirectoryAndConfig) {
  TempDir d;
  EXPECT_ERROR_HAS(load_error(d.path() / "nope"), "nope", "does not exist");
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "not found");
}

TEST(ModelLoad, BadJson) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  write_text(d.path() / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], ");
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "not valid JSON");
}

TEST(ModelLoad, BadGenerationConfigJson) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  write_text(d.path() / "generation_config.json", "[1, 2");
  EXPECT_ERROR_HAS(load_error(d.path()), "generation_config.json", "not valid JSON");
}

TEST(ModelLoad, UnknownArchitectureListsSupportedOnes) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  edit_config(d.path(), "architectures", {"GPT2LMHeadModel"});
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen3ForCausalLM");
}

TEST(ModelLoad, WrongFieldType) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  edit_config(d.path(), "hidden_size", "sixty-four");
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "hidden_size");
}

TEST(ModelLoad, MissingWeightsFile) {
  TempDir d;
  test::copy_configs(test::stories260k_dir(), d.path());
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors");
}

TEST(ModelLoad, MissingTensor) {
  TempDir d;
  write_model(d.path(), [](auto& ts) {
    std::erase_if(ts, [](auto& t) { return t.name == "model.layers.3.mlp.up_proj.weight"; });
  });
  EXPECT_ERROR_HAS(load_error(d.path()), "missing tensor", "model.layers.3.mlp.up_proj.weight");
}

TEST(ModelLoad, UnexpectedExtraTensor) {
  TempDir d;
  write_model(d.path(), [](auto& ts) {
    ts.push_back({"model.layers.9.bogus.weight", "F32", {2}, std::vector<uint8_t>(8)});
  });
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "unexpected tensor", "model.layers.9.bogus.weight");
}

TEST(ModelLoad, MisShapedTensorSaysExpectedAndGot) {
  TempDir d;
  write_model(d.path(), [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {64, 16}, t.bytes.resize(64 * 16 * 4);
  });
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "model.layers.0.self_attn.k_proj.weight", "[64, 16]",
                   "expected [32, 64]");
}

TEST(ModelLoad, TruncatedFile) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  const fs::path f = d.path() / "model.safetensors";
  fs::resize_file(f, fs::file_size(f) - 100);
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "truncated");
  fs::resize_file(f, 5);
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "truncated");
}

TEST(ModelLoad, GarbageHeader) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  std::fstream f(d.path() / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(8);
  f.write("#####", 5);
  f.close();
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "not valid JSON");
}

TEST(ModelLoad, UnsupportedDtype) {
  TempDir d;
  write_model(d.path(), [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.norm.weight") t.dtype = "I32";
  });
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "model.norm.weight", "unsupported dtype I32");
}

TEST(ModelLoad, UnsupportedRopeScaling) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  edit_config(d.path(), "rope_scaling", {{"rope_type", "dynamic"}, {"factor", 4.0}});
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "dynamic");
}

TEST(ModelLoad, RopeTypeThatIsNotAStringIsLabelled) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  edit_config(d.path(), "rope_scaling", {{"rope_type", 5}});
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "rope_scaling 'rope_type' must be a string", "5");
}

TEST(ModelLoad, IntegersOutsideInt32AreErrorsNotNarrowed) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  edit_config(d.path(), "vocab_size", (uint64_t(1) << 32) + 512);
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "vocab_size", "4294967808", "32-bit");
  edit_config(d.path(), "vocab_size", 512);
  edit_config(d.path(), "num_key_value_heads", -(int64_t(1) << 40));
  EXPECT_ERROR_HAS(load_error(d.path()), "config.json", "num_key_value_heads", "32-bit");
}

TEST(ModelLoad, ConfigValuesTheEngineCannotHonourAreErrors) {
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"sliding_window", 32, "LlamaForCausalLM has no sliding-window attention"},
      {"sliding_window", 0, "'sliding_window' must be a positive integer"},
      {"hidden_act", "gelu", "'hidden_act' is 'gelu'"},
      {"mlp_bias", true, "mlp_bias"},
      {"partial_rotary_factor", 0.5, "partial_rotary_factor 0.5"},
      {"layer_types",
       {"full_attention", "chunked_attention", "full_attention", "full_attention", "full_attention"},
       "'layer_types'[1] is 'chunked_attention'"},
      {"layer_types", {"full_attention"}, "'layer_types' must be a list of 5 entries"},
      {"attn_logit_softcapping", 50.0, "only supported for Gemma2ForCausalLM"},
  };
  for (const auto& [key, value, expect] : cases) {
    SCOPED_TRACE(key + " = " + value.dump());
    TempDir d;
    write_model(d.path(), [](auto&) {});
    edit_config(d.path(), key, value);
    EXPECT_ERROR_HAS(load_error(d.path()), "config.json", expect.c_str());
  }
}

TEST(ModelLoad, OverlappingSafetensorsOffsetsAreRejected) {
  TempDir d;
  write_model(d.path(), [](auto&) {});
  // Rewrite the header so the second tensor starts inside the first (sizes and data unchanged).
  const fs::path f = d.path() / "model.safetensors";
  std::ifstream in(f, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, ' ');
  in.read(header.data(), std::streamsize(n));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  nlohmann::json h = nlohmann::json::parse(header);
  std::vector<std::string> names;
  for (const auto& [name, e] : h.items())
    if (name != "__metadata__" && e["data_offsets"][1].get<uint64_t>() - e["data_offsets"][0].get<uint64_t>() == 256)
      names.push_back(name);  // [64] f32 norm weights
  ASSERT_GE(names.size(), 2u);
  const uint64_t b = h[names[0]]["data_offsets"][0].get<uint64_t>() + 4;
  h[names[1]]["data_offsets"] = {b, b + 256};
  const std::string out = h.dump();  // offsets are relative to the data, so its length may change
  const uint64_t n2 = out.size();
  std::ofstream o(f, std::ios::binary | std::ios::trunc);
  o.write(reinterpret_cast<const char*>(&n2), 8);
  o << out << data;
  o.close();
  EXPECT_ERROR_HAS(load_error(d.path()), "model.safetensors", "overlap", names[1].c_str());
}

// Logits of the prompt "Once upon a time" from the model in `dir`.
std::vector<float> logits_of(const fs::path& dir) {
  test::ModelHarness h(dir_source(dir));
  return h.step({{0, {1, 403, 407, 261, 378}}}).back();
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

TEST(ModelLoad, ShardedCheckpointLoadsTheSameModel) {
  TempDir d;
  test::copy_configs(test::stories260k_dir(), d.path());
  auto ts = test::read_tensors(test::stories260k_dir());
  const size_t half = ts.size() / 2;
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  std::vector<StTensor> a(ts.begin(), ts.begin() + long(half)), b(ts.begin() + long(half), ts.end());
  for (auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  test::write_safetensors(d.path() / "model-00001-of-00002.safetensors", a);
  test::write_safetensors(d.path() / "model-00002-of-00002.safetensors", b);
  write_text(d.path() / "model.safetensors.index.json", index.dump());
  EXPECT_EQ(logits_of(d.path()), logits_of(test::stories260k_dir()));

  fs::remove(d.path() / "model-00002-of-00002.safetensors");
  EXPECT_ERROR_HAS(load_error(d.path()), "model-00002-of-00002.safetensors", "not found");
}

TEST(ModelLoad, HalfPrecisionCheckpointsLoadCloseToF32) {
  const auto ref = logits_of(test::stories260k_dir());
  for (DType dt : {DType::F16, DType::BF16}) {
    TempDir d;
    test::copy_configs(test::stories260k_dir(), d.path());
    test::write_safetensors(d.path() / "model.safetensors", test::read_tensors(test::stories260k_dir(), dt));
    const double err = rel_l2(logits_of(d.path()), ref);
    EXPECT_GT(err, 0.0) << dtype_name(dt);  // the weights really were rounded
    EXPECT_LT(err, dt == DType::F16 ? 2e-3 : 2e-2) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace gs
