// FP8 weights on the CPU reference: e4m3 conversions, quantization_config parsing (every refused
// scheme names its field and value), broken FP8 checkpoints (scales of the wrong shape or dtype
// name the tensor), a DeepSeek FP8 checkpoint against its dequantized twin, --quantization fp8 on
// stories260K against the f32 goldens and on a mixture of experts (the experts left as they are).
// The FP8 fixtures' greedy tokens against HF run in families_test.cpp (Fp8/Families).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint_writer.h"
#include "golden.h"
#include "model/family_fixtures.h"
#include "model/llama_weights.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"
#include "model_harness.h"
#include "ops/backend.h"
#include "ops/fp8_weights.h"
#include "test_paths.h"

namespace gs {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(Fp8E4M3, EveryCodeRoundTripsAndEncodingRoundsToNearestEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f8e4m3_to_f32(uint8_t(c))));
      continue;
    }
    const float v = f8e4m3_to_f32(uint8_t(c));
    if (c == 0x80) continue;  // -0 encodes as -0 (same bits), checked below
    EXPECT_EQ(f32_to_f8e4m3(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(f32_to_f8e4m3(-0.0f), 0x80);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f32_to_f8e4m3(1000.0f), 0x7e);               // saturates to 448
  EXPECT_EQ(f32_to_f8e4m3(-1e9f), 0xfe);
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.0625f)), 1.0f);   // tie between 1 and 1.125: to even
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.1875f)), 1.25f);  // tie between 1.125 and 1.25: to even
  EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.07f)), 1.125f);
}

TEST(Fp8Quantize, GroupScalesMapEachGroupsLargestValueToE4m3sLargest) {
  // 4 rows x 256 columns: groups of 2 rows by 128 columns.
  std::vector<float> w(4 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i)) * float(1 + i % 7);
  std::vector<uint8_t> q(w.size());
  std::vector<float> scales(4 * 2), deq(w.size());
  fp8_quantize_host(w.data(), 4, 256, 2, true, q.data(), scales.data(), deq.data());
  for (int r = 0; r < 4; ++r)
    for (int g = 0; g < 2; ++g) {
      float amax = 0;
      for (int rr = r / 2 * 2; rr < r / 2 * 2 + 2; ++rr)
        for (int k = 128 * g; k < 128 * g + 128; ++k) amax = std::max(amax, std::fabs(w[size_t(rr * 256 + k)]));
      EXPECT_EQ(scales[size_t(r * 2 + g)], amax / 448.0f);
    }
  for (size_t i = 0; i < w.size(); ++i) {
    const float s = scales[(i / 256) * 2 + (i % 256) / 128];
    EXPECT_EQ(deq[i], f8e4m3_to_f32(q[i]) * s);
    EXPECT_LE(std::fabs(deq[i] - w[i]), std::fabs(w[i]) * 0.0625f + s * std::ldexp(1.0f, -10));
  }
}

// config.json of the fp8_channel fixture with its quantization_config replaced.
std::string config_error(const json& qc) {
  test::TempDir dir;
  json cfg = json::parse(std::ifstream(test::family_dir("fp8_channel") / "config.json"));
  cfg["quantization_config"] = qc;
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  try {
    load_model_config(dir.path());
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Fp8Config, OtherSchemesAreRefusedNamingTheFieldValueAndTheSupportedOnes) {
  for (const char* m : {"awq", "gptq", "bitsandbytes", "modelopt"}) {
    const std::string e = config_error({{"quant_method", m}, {"bits", 4}});
    EXPECT_NE(e.find(fmt::format("quant_method '{}' is not supported", m)), std::string::npos) << e;
    EXPECT_NE(e.find("supported: quant_method 'fp8'"), std::string::npos) << e;
  }
  const std::string mx = config_error({{"quant_method", "mxfp4"}});  // gpt-oss's experts only
  EXPECT_NE(mx.find("'mxfp4' is only supported for GptOssForCausalLM"), std::string::npos) << mx;
  const std::string nvfp4 = config_error({{"quant_method", "compressed-tensors"}, {"format", "nvfp4-pack-quantized"}});
  EXPECT_NE(nvfp4.find("format 'nvfp4-pack-quantized' is not supported"), std::string::npos) << nvfp4;
  const std::string blk = config_error({{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}});
  EXPECT_NE(blk.find("weight_block_size [64,64] is not supported"), std::string::npos) << blk;
  json ct = json::parse(std::ifstream(test::family_dir("fp8_channel") / "config.json"))["quantization_config"];
  ct["config_groups"]["group_0"]["weights"]["num_bits"] = 4;
  ct["config_groups"]["group_0"]["weights"]["type"] = "int";
  const std::string w4 = config_error(ct);
  EXPECT_NE(w4.find("weights type 'int' num_bits 4 is not supported"), std::string::npos) << w4;
}

TEST(Fp8Config, EachFixtureLayoutIsDetected) {
  const QuantConfig ch = load_model_config(test::family_dir("fp8_channel")).quant;
  EXPECT_TRUE(ch.fp8 && !ch.online && ch.scales == Fp8WeightScales::Channel && !ch.static_activations);
  EXPECT_FALSE(ch.quantizes("lm_head"));
  EXPECT_TRUE(ch.quantizes("model.layers.0.mlp.down_proj"));
  const QuantConfig bl = load_model_config(test::family_dir("fp8_block")).quant;
  EXPECT_TRUE(bl.fp8 && bl.scales == Fp8WeightScales::Block && bl.scale_suffix == "weight_scale_inv");
  const QuantConfig te = load_model_config(test::family_dir("fp8_tensor")).quant;
  EXPECT_TRUE(te.fp8 && te.scales == Fp8WeightScales::Tensor && te.static_activations);
  EXPECT_EQ(te.describe(), "fp8 e4m3 (fp8, per-tensor weight scales, static per-tensor activations)");
  QuantConfig none;
  apply_quantization_flag(none, "fp8");
  EXPECT_TRUE(none.fp8 && none.online && none.scales == Fp8WeightScales::Channel);
  EXPECT_THROW(apply_quantization_flag(none, "awq"), Error);
}

// --load-format dummy on an FP8 checkpoint's directory runs its scheme on random weights, as vLLM
// does (bench graphs --model Qwen3-8B-FP8 --load-format dummy): the dummy values are rounded through
// e4m3 in the config's 128x128 blocks, so the logits differ from the same dummy weights unquantized
// by e4m3's rounding only.
TEST(Fp8Config, DummyWeightsOfAnFp8CheckpointKeepItsScheme) {
  test::TempDir plain_dir;
  json cfg = json::parse(std::ifstream(test::family_dir("fp8_block") / "config.json"));
  cfg.erase("quantization_config");
  std::ofstream(plain_dir.path() / "config.json") << cfg.dump();
  const auto logits = [](const fs::path& dir) {
    ModelSource src;
    src.dir = dir.string();
    src.dummy = true;
    test::ModelHarness h(src, 8);
    return std::pair{h.config().quant, h.step({{0, {1, 7, 42, 5}}}).back()};
  };
  const auto [q, fp8] = logits(test::family_dir("fp8_block"));
  const auto [none, plain] = logits(plain_dir.path());
  EXPECT_TRUE(q.fp8 && !q.online && q.scales == Fp8WeightScales::Block) << q.describe();
  EXPECT_FALSE(none.fp8);
  double d = 0, n = 0;
  for (size_t i = 0; i < plain.size(); ++i) d += (fp8[i] - plain[i]) * (fp8[i] - plain[i]), n += plain[i] * plain[i];
  const double rel = std::sqrt(d / n);
  // e4m3 keeps 3 mantissa bits: a weight's relative rounding error is at most 2^-4 (RMS ~2^-4 / sqrt(3)).
  EXPECT_GT(rel, 1e-4);
  EXPECT_LT(rel, 0.1);
}

// The fixture's tensors, raw (F8_E4M3 kept), for a broken copy.
std::vector<test::StTensor> raw_tensors(const fs::path& dir) {
  SafetensorsCheckpoint ck(dir);
  std::vector<test::StTensor> out;
  for (const auto& [name, t] : ck.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const size_t bytes = size_t(n) * dtype_size(t.dtype);
    const auto* p = static_cast<const uint8_t*>(t.data);
    const char* dt = t.dtype == DType::F8E4M3 ? "F8_E4M3" : t.dtype == DType::F32 ? "F32" : "BF16";
    out.push_back({name, dt, t.shape, std::vector<uint8_t>(p, p + bytes)});
  }
  return out;
}

std::string load_error(const fs::path& dir) {
  try {
    ModelSource src;
    src.dir = dir.string();
    test::ModelHarness h(src, 8);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(Fp8Checkpoint, ScalesOfTheWrongShapeOrDtypeOrMissingNameTheTensor) {
  const fs::path src = test::family_dir("fp8_channel");
  const std::string scale = "model.layers.1.mlp.up_proj.weight_scale";
  auto broken = [&](auto edit) {
    test::TempDir dir;
    auto ts = raw_tensors(src);
    edit(ts);
    test::write_safetensors(dir.path() / "model.safetensors", ts);
    fs::copy_file(src / "config.json", dir.path() / "config.json");
    return load_error(dir.path());
  };
  EXPECT_EQ(broken([](auto&) {}), "");
  const std::string shape = broken([&](auto& ts) {
    for (auto& t : ts)
      if (t.name == scale) t.shape = {t.shape[0] / 2, 2};
  });
  EXPECT_NE(shape.find("scale '" + scale + "' has shape [64, 2], expected [128, 1] or [128]"), std::string::npos)
      << shape;
  const std::string dtype = broken([&](auto& ts) {
    for (auto& t : ts)
      if (t.name == scale) t.dtype = "I32";
  });
  EXPECT_NE(dtype.find(scale), std::string::npos) << dtype;
  const std::string missing =
      broken([&](auto& ts) { std::erase_if(ts, [&](const auto& t) { return t.name == scale; }); });
  EXPECT_NE(missing.find("has no scale tensor '" + scale + "'"), std::string::npos) << missing;
}

TEST(Fp8Checkpoint, Fp8TensorsWithoutAQuantizationConfigAreRefused) {
  const fs::path src = test::family_dir("fp8_channel");
  test::TempDir dir;
  test::write_safetensors(dir.path() / "model.safetensors", raw_tensors(src));
  json cfg = json::parse(std::ifstream(src / "config.json"));
  cfg.erase("quantization_config");
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  const std::string e = load_error(dir.path());
  EXPECT_NE(e.find("is F8_E4M3 but config.json has no quantization_config"), std::string::npos) << e;
}

// DeepSeek-V3's FP8 release layout (quant_method fp8, 128x128 blocks, weight_scale_inv) written
// from the deepseek_v3 fixture: every Linear weight quantized (the experts, kv_a_proj_with_mqa and
// kv_b_proj too; the embedding, lm_head and router left as they are), beside a twin checkpoint
// holding the exact dequantized values in f32. The FP8 checkpoint loads (DeepSeek's weights are
// dequantized at load) and gives the twin's logits bit for bit, and the quantization moved them.
TEST(Fp8Checkpoint, DeepseekBlockScaledLoadsAsItsDequantizedTwin) {
  const fs::path src = test::family_dir("deepseek_v3");
  test::TempDir fp8_dir, twin_dir;
  std::vector<test::StTensor> fp8, twin;
  const auto bytes = [](const auto& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    return std::vector<uint8_t>(p, p + v.size() * sizeof(v[0]));
  };
  int quantized = 0;
  for (test::StTensor& t : test::read_tensors(src)) {
    const std::string& n = t.name;
    const bool linear = t.shape.size() == 2 && n.ends_with(".weight") && n.find("embed_tokens") == std::string::npos &&
                        n != "lm_head.weight" && !n.ends_with("mlp.gate.weight");
    if (!linear) {
      fp8.push_back(t), twin.push_back(t);
      continue;
    }
    const int64_t N = t.shape[0], K = t.shape[1], G = (K + 127) / 128, B = (N + 127) / 128;
    std::vector<uint8_t> q(size_t(N * K));
    std::vector<float> row_scales(size_t(N * G)), deq(size_t(N * K)), inv(size_t(B * G));
    fp8_quantize_host(reinterpret_cast<const float*>(t.bytes.data()), N, K, 128, true, q.data(), row_scales.data(),
                      deq.data());
    for (int64_t b = 0; b < B; ++b)  // a block's scale: that of its first row
      for (int64_t g = 0; g < G; ++g) inv[size_t(b * G + g)] = row_scales[size_t(b * 128 * G + g)];
    fp8.push_back({n, "F8_E4M3", t.shape, q});
    fp8.push_back({n.substr(0, n.size() - 6) + "weight_scale_inv", "F32", {B, G}, bytes(inv)});
    twin.push_back({n, "F32", t.shape, bytes(deq)});
    ++quantized;
  }
  EXPECT_GT(quantized, 30);
  test::write_safetensors(fp8_dir.path() / "model.safetensors", fp8);
  test::write_safetensors(twin_dir.path() / "model.safetensors", twin);
  test::copy_configs(src, twin_dir.path());
  json cfg = json::parse(std::ifstream(src / "config.json"));
  cfg["quantization_config"] = {
      {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  std::ofstream(fp8_dir.path() / "config.json") << cfg.dump();
  const auto logits = [](const fs::path& dir) {
    ModelSource m;
    m.dir = dir.string();
    test::ModelHarness h(m);
    return h.step({{0, test::load_family_fixture("deepseek_v3").prompts[0]}});
  };
  const auto got = logits(fp8_dir.path()), want = logits(twin_dir.path());
  EXPECT_EQ(got, want);
  EXPECT_NE(got, logits(src)) << "the weights were not quantized";
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i)
    num += double(got[i] - want[i]) * (got[i] - want[i]), den += double(want[i]) * want[i];
  return std::sqrt(num / den);
}

// --quantization fp8 on DeepSeek quantizes the routed experts alone (per output channel), where
// their widths are multiples of 128: on the deepseek_v2 fixture's config at hidden size and expert
// width 128 (dummy weights) the logits move by e4m3's rounding of the experts and stay within it;
// on the fixture itself (hidden 64: no FP8 experts) they are the unquantized model's bit for bit,
// so no other weight was rounded.
TEST(Fp8Online, DeepseekQuantizesTheRoutedExpertsAlone) {
  const std::vector<int32_t> prompt = test::load_family_fixture("deepseek_v2").prompts[0];
  const auto logits = [&](const fs::path& dir, bool dummy, const char* quantization) {
    ModelSource m;
    m.dir = dir.string();
    m.dummy = dummy;
    m.quantization = quantization;
    test::ModelHarness h(m);
    return h.step({{0, prompt}});
  };
  const fs::path src = test::family_dir("deepseek_v2");
  EXPECT_EQ(logits(src, false, "fp8"), logits(src, false, ""));
  test::TempDir dir;
  json cfg = json::parse(std::ifstream(src / "config.json"));
  cfg["hidden_size"] = 128, cfg["moe_intermediate_size"] = 128;
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  const auto q = logits(dir.path(), true, "fp8"), plain = logits(dir.path(), true, "");
  double least = 1e9, worst = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const double r = rel_l2(q[i], plain[i]);
    least = std::min(least, r), worst = std::max(worst, r);
  }
  std::printf("[fp8-online] deepseek_v2 at width 128: logits rel-L2 to the unquantized model %.4f..%.4f\n", least,
              worst);
  EXPECT_GT(least, 1e-4) << "the experts were not quantized";
  EXPECT_LT(worst, 0.2);
}

// --quantization fp8 on stories260K (f32 weights): every projection weight moves by at most half
// an e4m3 step, 2^-4 of its magnitude (about 3% RMS); these independent errors add up over 5
// layers of 7 projections each to several percent of each logit vector. The bound, 0.2 rel-L2 at
// every position, leaves twice that while a wrong scale or layout costs O(1); greedy agreement at
// >= 85% of the positions says the model still predicts the text.
TEST(Fp8Online, Stories260KStaysCloseToTheF32Goldens) {
  const json g = test::stories_golden("full_logits_20");
  ModelSource src;
  src.dir = test::stories260k_dir().string();
  src.quantization = "fp8";
  test::ModelHarness h(src);
  const auto logits = h.step({{0, g["input_ids"].get<std::vector<int>>()}});
  const auto want = g["logits"].get<std::vector<std::vector<float>>>();
  ASSERT_EQ(logits.size(), want.size());
  int agree = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = rel_l2(logits[i], want[i]);
    worst = std::max(worst, e);
    EXPECT_LT(e, 0.2) << "position " << i;
    agree += std::max_element(logits[i].begin(), logits[i].end()) - logits[i].begin() ==
             std::max_element(want[i].begin(), want[i].end()) - want[i].begin();
    EXPECT_GT(e, 1e-4) << "position " << i << ": the weights were not quantized";
  }
  std::printf("[fp8-online] stories260K logits rel-L2 max %.4f, greedy agreement %d/%zu\n", worst, agree, want.size());
  EXPECT_GE(agree, int(want.size()) * 85 / 100);
}

// --quantization fp8 on a mixture of experts whose widths FP8 experts cannot take (the qwen3_moe
// fixture's hidden 64 and expert width 40, and qwen2_moe's shared expert; f32 on the CPU): the
// experts keep their checkpoint values bit for bit, while the attention projections are quantized.
TEST(Fp8Online, MoeExpertsKeepTheirWeights) {
  auto cpu = make_cpu_backend();
  const auto values = [](const Tensor& t) {
    const float* p = t.data_as<const float>();
    return std::vector<float>(p, p + t.numel());
  };
  for (const char* family : {"qwen3_moe", "qwen2_moe"}) {
    SCOPED_TRACE(family);
    const fs::path dir = test::family_dir(family);
    const auto load = [&](const std::string& quantization) {
      ModelConfig cfg = load_model_config(dir);
      apply_quantization_flag(cfg.quant, quantization);
      auto src = make_checkpoint_source(dir.string(), *cpu, cfg);
      return load_llama_weights(cfg, make_tp_layout(cfg, 0, 1), *cpu, *src);
    };
    const LlamaWeights fp8 = load("fp8"), plain = load("");
    int sparse = 0;
    for (size_t l = 0; l < plain.layers.size(); ++l) {
      const MoeLayerWeights &a = fp8.layers[l].moe, &b = plain.layers[l].moe;
      if (!b.experts_gate_up.defined()) continue;
      ++sparse;
      EXPECT_EQ(values(a.experts_gate_up), values(b.experts_gate_up)) << "layer " << l;
      EXPECT_EQ(values(a.experts_down), values(b.experts_down)) << "layer " << l;
      if (b.shared_gate_up.defined()) {
        EXPECT_EQ(values(a.shared_gate_up), values(b.shared_gate_up)) << "layer " << l;
        EXPECT_EQ(values(a.shared_down), values(b.shared_down)) << "layer " << l;
      }
      EXPECT_NE(values(fp8.layers[l].qkv), values(plain.layers[l].qkv)) << "layer " << l << ": qkv not quantized";
    }
    EXPECT_GT(sparse, 0);
  }
}

// --quantization fp8 where FP8 experts apply (the qwen3_moe config at hidden 128 and expert width
// 128, dummy weights): the CPU reference holds each routed expert's values rounded through e4m3
// with a scale a row, exactly the host quantization of the unquantized load, as the GPU's e4m3
// experts hold them.
TEST(Fp8Online, MoeExpertsAtKernelWidthsAreRoundedThroughE4m3) {
  auto cpu = make_cpu_backend();
  test::TempDir dir;
  json cfg = json::parse(std::ifstream(test::family_dir("qwen3_moe") / "config.json"));
  cfg["hidden_size"] = 128, cfg["moe_intermediate_size"] = 128, cfg["intermediate_size"] = 256;
  std::ofstream(dir.path() / "config.json") << cfg.dump();
  const auto load = [&](const std::string& quantization) {
    ModelConfig c = load_model_config(dir.path());
    apply_quantization_flag(c.quant, quantization);
    auto src = make_dummy_source(0, *cpu);
    return load_llama_weights(c, make_tp_layout(c, 0, 1), *cpu, *src);
  };
  const LlamaWeights fp8 = load("fp8"), plain = load("");
  for (const Tensor* w : {&plain.layers[0].moe.experts_gate_up, &plain.layers[0].moe.experts_down}) {
    const Tensor& q =
        w == &plain.layers[0].moe.experts_gate_up ? fp8.layers[0].moe.experts_gate_up : fp8.layers[0].moe.experts_down;
    const int64_t N = w->dim(0), K = w->row_elems();
    std::vector<float> want(static_cast<size_t>(N * K));
    fp8_quantize_host(w->data_as<const float>(), N, K, 1, false, nullptr, nullptr, want.data());
    const float* got = q.data_as<const float>();
    EXPECT_EQ(std::vector<float>(got, got + N * K), want);
    EXPECT_NE(want, std::vector<float>(w->data_as<const float>(), w->data_as<const float>() + N * K));
  }
}

// The checkpoint's KV-cache scales reach the cache: the fp8_tensor fixture with layer 0's
// self_attn.k_scale 1 -> 0.5 and v_scale 1 -> 0.25 stores the same k, v (layer 0's inputs do not
// depend on its cache) as e4m3(k / 0.5) = 2 e4m3(k) and 4 e4m3(v), exactly, wherever the values
// stay normal and in range.
TEST(Fp8KvCache, CheckpointScalesQuantizeTheCache) {
  const fs::path src = test::family_dir("fp8_tensor");
  test::TempDir dir;
  auto ts = raw_tensors(src);
  for (auto& t : ts) {
    const float s = t.name == "model.layers.0.self_attn.k_scale"   ? 0.5f
                    : t.name == "model.layers.0.self_attn.v_scale" ? 0.25f
                                                                   : 0.0f;
    if (s > 0) std::memcpy(t.bytes.data(), &s, sizeof(float));
  }
  test::write_safetensors(dir.path() / "model.safetensors", ts);
  fs::copy_file(src / "config.json", dir.path() / "config.json");
  const std::vector<int> prompt = {1, 5, 9, 14, 2, 7};
  auto cache_values = [&](const fs::path& d) {
    ModelSource ms;
    ms.dir = d.string();
    test::ModelHarness h(ms, 16, 1, 8, DType::F8E4M3);
    h.step({{0, prompt}});
    std::vector<std::vector<float>> out;
    for (const Tensor& t : {h.kv(0).k, h.kv(0).v}) {
      out.emplace_back(size_t(t.numel()));
      convert_host(t.data(), DType::F8E4M3, out.back().data(), DType::F32, out.back().size());
    }
    return out;
  };
  const auto unit = cache_values(src), scaled = cache_values(dir.path());
  for (int plane = 0; plane < 2; ++plane) {
    const float factor = plane == 0 ? 2.0f : 4.0f;
    int compared = 0;
    for (size_t i = 0; i < unit[size_t(plane)].size(); ++i) {
      const float a = unit[size_t(plane)][i], b = scaled[size_t(plane)][i];
      if (std::fabs(a) < 1.0f / 64 || std::fabs(a) * factor > 240.0f) continue;  // subnormal or saturated in one
      ASSERT_EQ(b, a * factor) << (plane == 0 ? "k" : "v") << " element " << i;
      ++compared;
    }
    EXPECT_GT(compared, 100) << "plane " << plane;
  }
}

// --kv-cache-dtype fp8 on stories260K (f32 weights, no scales in the checkpoint: 1.0): every K and
// V element attention reads is rounded to e4m3, a relative error of at most 2^-4 (about 3.6% RMS).
// At a typical position that moves the logits by a few percent (the median must stay under 0.1);
// where the next token hinges on a sharp attention score a few positions move more (0.21 and 0.27
// of 20 here), so every position is bounded at 0.4, which a wrong scale or layout (O(1) errors in
// every K and V) exceeds. Greedy agreement >= 85%, and every position must move (> 1e-4): the
// cache was quantized, this step's own tokens included.
TEST(Fp8KvCache, Stories260KStaysCloseToTheF32Goldens) {
  const json g = test::stories_golden("full_logits_20");
  ModelSource src;
  src.dir = test::stories260k_dir().string();
  test::ModelHarness h(src, 256, 4, 128, DType::F8E4M3);
  const auto logits = h.step({{0, g["input_ids"].get<std::vector<int>>()}});
  const auto want = g["logits"].get<std::vector<std::vector<float>>>();
  ASSERT_EQ(logits.size(), want.size());
  int agree = 0;
  std::vector<double> errors;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = rel_l2(logits[i], want[i]);
    errors.push_back(e);
    EXPECT_LT(e, 0.4) << "position " << i;
    EXPECT_GT(e, 1e-4) << "position " << i << ": the cache was not quantized";
    agree += std::max_element(logits[i].begin(), logits[i].end()) - logits[i].begin() ==
             std::max_element(want[i].begin(), want[i].end()) - want[i].begin();
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  std::printf("[fp8-kv] stories260K logits rel-L2 median %.4f max %.4f, greedy agreement %d/%zu\n", median,
              errors.back(), agree, want.size());
  EXPECT_LT(median, 0.1);
  EXPECT_GE(agree, int(want.size()) * 85 / 100);
}

// DeepSeek's latent cache takes the checkpoint's self_attn.k_scale (vLLM's MLA: k's scale for the one
// latent plane): the deepseek_v2 fixture with layer 0's k_scale 0.5 stores the same latent rows (its
// inputs do not depend on its cache) as e4m3(x / 0.5) = 2 e4m3(x), wherever the values stay normal
// and in range; without the tensor the scale is 1.
TEST(Fp8KvCache, DeepseekLatentCacheTakesTheCheckpointScale) {
  const fs::path src = test::family_dir("deepseek_v2");
  test::TempDir dir;
  auto ts = raw_tensors(src);
  const float half = 0.5f;
  ts.push_back({"model.layers.0.self_attn.k_scale", "F32", {}, std::vector<uint8_t>(sizeof(float))});
  std::memcpy(ts.back().bytes.data(), &half, sizeof(float));
  test::write_safetensors(dir.path() / "model.safetensors", ts);
  fs::copy_file(src / "config.json", dir.path() / "config.json");
  const std::vector<int32_t> prompt = test::load_family_fixture("deepseek_v2").prompts[0];
  auto latent_rows = [&](const fs::path& d) {
    ModelSource ms;
    ms.dir = d.string();
    test::ModelHarness h(ms, 256, 4, 128, DType::F8E4M3);
    h.step({{0, prompt}});
    const Tensor& k = h.kv(0).k;
    EXPECT_FALSE(h.kv(0).v.defined());  // one latent plane
    std::vector<float> out(size_t(k.numel()));
    convert_host(k.data(), DType::F8E4M3, out.data(), DType::F32, out.size());
    return out;
  };
  const auto unit = latent_rows(src), scaled = latent_rows(dir.path());
  ASSERT_EQ(unit.size(), scaled.size());
  int compared = 0;
  for (size_t i = 0; i < unit.size(); ++i) {
    if (std::fabs(unit[i]) < 1.0f / 64 || std::fabs(unit[i]) * 2 > 240.0f) continue;  // subnormal or saturated
    ASSERT_EQ(scaled[i], 2 * unit[i]) << "latent element " << i;
    ++compared;
  }
  EXPECT_GT(compared, 100);
}

// DeepSeek's latent cache in e4m3 (--kv-cache-dtype fp8): each latent value (normalised c_kv and
// the rotated k_pe) rounds to e4m3's 3 mantissa bits, ~2% RMS, which attention averages over the
// context; on these tiny random fixtures the logits stay within the stories260K test's bounds of
// the f32 cache's (median 0.1, every position 0.4 rel-L2) and move.
TEST(Fp8KvCache, DeepseekLatentCacheStaysCloseToF32) {
  for (const char* family : {"deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(family);
    ModelSource src;
    src.dir = test::family_dir(family).string();
    const std::vector<int32_t> prompt = test::load_family_fixture(family).prompts[0];
    test::ModelHarness f32(src), e4m3(src, 256, 4, 128, DType::F8E4M3);
    const auto want = f32.step({{0, prompt}}), got = e4m3.step({{0, prompt}});
    std::vector<double> errors;
    for (size_t i = 0; i < want.size(); ++i) errors.push_back(rel_l2(got[i], want[i]));
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2];
    std::printf("[fp8-kv] %s latent cache: logits rel-L2 to the f32 cache median %.4f max %.4f\n", family, median,
                errors.back());
    EXPECT_LT(median, 0.1);
    EXPECT_LT(errors.back(), 0.4);
    EXPECT_GT(errors.front(), 1e-5) << "the cache was not quantized";
  }
}

}  // namespace
}  // namespace gs
