// gpt-oss beyond the HF fixture (families_test.cpp): MXFP4 dequantization against hand-made
// blocks, an MXFP4 checkpoint of the fixture giving the logits of its dequantized f32 twin, the
// config fields refused by name, YaRN's frequencies, the preset's total vs active parameters, and
// dummy experts written in place equal to the host's rearrangement of the same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "checkpoint_writer.h"
#include "core/error.h"
#include "model/family_fixtures.h"
#include "model/llama_weights.h"
#include "model/load_progress.h"
#include "model/model_config.h"
#include "model/model_factory.h"
#include "model/mxfp4.h"
#include "model/presets.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"
#include "model_harness.h"

namespace gs {
namespace {

using nlohmann::json;

TEST(Mxfp4, DequantizesHandMadeBlocksLowNibbleFirst) {
  // Row 0: scale 2^0, bytes 0x21 (1 -> 0.5, then 2 -> 1.0), 0xF8 (8 -> -0, then 15 -> -6).
  // Row 1: scale 2^-2, byte 0x7A (10 -> -1, then 7 -> 6).
  std::vector<uint8_t> blocks(2 * 16, 0), scales = {127, 125};
  blocks[0] = 0x21, blocks[1] = 0xF8, blocks[16] = 0x7A;
  std::vector<float> out(64, 1.0f);
  dequantize_mxfp4(blocks.data(), scales.data(), 2, 1, out.data());
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::signbit(out[2]));
  EXPECT_EQ(out[3], -6.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[32], -0.25f);
  EXPECT_EQ(out[33], 1.5f);
  const float all[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t c = 0; c < 16; ++c) EXPECT_EQ(e2m1_value(c), all[c]) << int(c);
}

// The nearest e2m1 code of v (|v| <= 6).
uint8_t e2m1_code(float v) {
  uint8_t best = 0;
  for (uint8_t c = 0; c < 8; ++c)
    if (std::fabs(std::fabs(v) - e2m1_value(c)) < std::fabs(std::fabs(v) - e2m1_value(best))) best = c;
  return uint8_t(best | (v < 0 ? 8 : 0));
}

// A [E, K, N] f32 tensor as the Hub's MXFP4 pair ([E, N, K/32, 16] blocks, [E, N, K/32] scales),
// and the values they stand for written back into `t` (so both checkpoints hold the same model).
std::pair<test::StTensor, test::StTensor> to_mxfp4(test::StTensor& t) {
  const int64_t E = t.shape[0], K = t.shape[1], N = t.shape[2], G = K / 32;
  auto* v = reinterpret_cast<float*>(t.bytes.data());
  std::vector<uint8_t> blocks(size_t(E * N * G * 16)), scales(size_t(E * N * G));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) {
        float amax = 0;
        for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[(e * K + g * 32 + i) * N + n]));
        const int s = amax > 0 ? int(std::ceil(std::log2(amax / 6.0f))) : 0;
        scales[size_t((e * N + n) * G + g)] = uint8_t(s + 127);
        for (int64_t i = 0; i < 32; ++i) {
          float& x = v[(e * K + g * 32 + i) * N + n];
          const uint8_t c = e2m1_code(std::ldexp(x, -s));
          x = std::ldexp(e2m1_value(c), s);
          uint8_t& b = blocks[size_t(((e * N + n) * G + g) * 16 + i / 2)];
          b = uint8_t(i % 2 == 0 ? (b & 0xF0) | c : (b & 0x0F) | (c << 4));
        }
      }
  return {{t.name + "_blocks", "U8", {E, N, G, 16}, blocks}, {t.name + "_scales", "U8", {E, N, G}, scales}};
}

std::vector<std::vector<float>> prefill_logits(const std::string& dir, const std::vector<int32_t>& prompt) {
  ModelSource src;
  src.dir = dir;
  test::ModelHarness h(src, 128, 4, 73);
  return h.step({{0, prompt}});
}

TEST(GptOss, Mxfp4CheckpointGivesItsDequantizedTwinsLogits) {
  const auto fixture = test::family_dir("gpt_oss");
  test::TempDir mx, f32;
  std::vector<test::StTensor> plain, quant;
  for (test::StTensor& t : test::read_tensors(fixture)) {
    // gate_up_proj [E, H = 64, 2I] in MXFP4; down_proj's I = 40 is no multiple of 32 and stays f32.
    if (t.name.size() > 20 && t.name.compare(t.name.size() - 20, 20, "experts.gate_up_proj") == 0) {
      auto [b, s] = to_mxfp4(t);
      quant.push_back(b), quant.push_back(s);
    } else {
      quant.push_back(t);
    }
    plain.push_back(t);
  }
  test::write_safetensors(f32.path() / "model.safetensors", plain);
  test::write_safetensors(mx.path() / "model.safetensors", quant);
  test::copy_configs(fixture, f32.path());
  json c = json::parse(std::ifstream(fixture / "config.json"));
  c["quantization_config"] = {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"model.layers.*.self_attn"}}};
  std::ofstream(mx.path() / "config.json") << c.dump();
  std::filesystem::copy_file(fixture / "generation_config.json", mx.path() / "generation_config.json");
  const std::vector<int32_t> prompt = test::load_family_fixture("gpt_oss").prompts[1];
  const auto a = prefill_logits(mx.path().string(), prompt), b = prefill_logits(f32.path().string(), prompt);
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) ASSERT_EQ(a[t], b[t]) << "token " << t;
  EXPECT_EQ(load_model_config(mx.path()).quant.describe(), "mxfp4 experts (dequantized to the compute dtype at load)");
}

json config() { return json::parse(std::ifstream(test::family_dir("gpt_oss") / "config.json")); }

ModelConfig load(const json& j) {
  test::TempDir d;
  std::ofstream(d.path() / "config.json") << j.dump();
  return load_model_config(d.path());
}

void expect_error(const json& j, const std::string& needle) {
  try {
    load(j);
    ADD_FAILURE() << "no error, expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GptOss, ConfigFieldsAreHonouredOrRefusedByName) {
  json j = config();
  j.erase("num_experts_per_tok");
  j["experts_per_token"] = 2;  // the Hub's alias
  EXPECT_EQ(load(j).moe.routing.top_k, 2);
  j["num_experts_per_tok"] = 3;
  expect_error(j, "experts_per_token");
  j = config();
  j.erase("layer_types");  // HF's default: even layers slide
  EXPECT_EQ(load(j).layer_windows, (std::vector<int>{24, -1}));
  j = config();
  j["swiglu_limit"] = 0;
  expect_error(j, "swiglu_limit");
  j = config();
  j["hidden_act"] = "gelu";
  expect_error(j, "hidden_act");
  j = config();
  j["output_router_logits"] = true;
  expect_error(j, "output_router_logits");
  j = config();
  j["quantization_config"] = {{"quant_method", "mxfp4"}};
  EXPECT_TRUE(load(j).moe.mxfp4_experts);
  j["architectures"] = {"MixtralForCausalLM"};
  j["num_local_experts"] = 4;
  expect_error(j, "mxfp4");
  j = config();
  j["attention_bias"] = false;
  const ModelConfig nb = load(j);
  EXPECT_FALSE(nb.attention_bias || nb.o_proj_bias);
}

TEST(GptOss, YarnFrequenciesFollowHuggingFace) {
  // HF _compute_yarn_parameters for head_dim 16, theta 150000, factor 4 from 64 positions,
  // beta 32 / 1: the correction range is [max(-0.77, 0), 1.56] (not truncated), so pair 0 keeps
  // its frequency, pairs from 2 on are divided by 4 and pair 1 blends.
  RopeConfig r;
  r.theta = 150000.0f, r.head_dim = 16, r.yarn_factor = 4.0f, r.yarn_original_max_position = 64;
  r.yarn_truncate = false;
  const std::vector<float> f = rope_inv_freq(r);
  auto corr = [](double rot) { return 16 * std::log(64 / (rot * 6.283185307179586)) / (2 * std::log(150000.0)); };
  const double low = std::max(corr(32), 0.0), high = corr(1);
  EXPECT_NEAR(high, 1.558, 1e-3);
  for (int i = 0; i < 8; ++i) {
    const double base = 1.0 / std::pow(150000.0, 2.0 * i / 16), ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    EXPECT_NEAR(f[size_t(i)], base / 4 * ramp + base * (1 - ramp), 1e-6 * base) << i;
  }
  r.yarn_truncate = true;  // floor / ceil: [0, 2], so pair 1 is half way
  const std::vector<float> t = rope_inv_freq(r);
  const double b1 = 1.0 / std::pow(150000.0, 2.0 / 16);
  EXPECT_NEAR(t[1], b1 / 4 / 2 + b1 / 2, 1e-6 * b1);
  EXPECT_NEAR(yarn_attention_factor(32.0f), 0.1 * std::log(32.0) + 1, 1e-6);
}

// Cascading would split each softmax in two partials merged without the sink: layers with sinks
// attend without it, and their backend says so (the runner then never plans cascade steps).
TEST(GptOss, LayersWithSinksNeverCascade) {
  auto be = make_cpu_backend();
  const AttentionShape s = attention_shape(find_preset("gpt-oss-20b").config);
  EXPECT_TRUE(s.sinks);
  EXPECT_FALSE(make_cpu_attention(*be, s)->supports_cascade());
  EXPECT_TRUE(make_cpu_attention(*be, attention_shape(find_preset("mixtral-8x7b").config))->supports_cascade());
}

TEST(GptOss, PresetHasTheRealShapesAndCountsActiveParameters) {
  const ModelConfig c = find_preset("gpt-oss-20b").config;
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.moe.num_experts, 32);
  EXPECT_EQ(c.window(0), 128);
  EXPECT_EQ(c.window(1), -1);
  // openai/gpt-oss-20b: 20.9B parameters, 3.6B active, OpenAI's count leaving out the embedding
  // table (a lookup); graphserve's active count includes it (as Qwen's 3.3B of Qwen3-30B-A3B).
  EXPECT_NEAR(double(c.num_parameters()) / 1e9, 20.9, 0.1);
  const double embedding = double(c.vocab_size) * c.hidden_size;
  EXPECT_NEAR((double(c.num_active_parameters()) - embedding) / 1e9, 3.6, 0.05);
}

// A dummy source that cannot write gathered elements in place, so gpt-oss's loader rearranges
// load_host's values on the host (a checkpoint's path).
class HostRearranged final : public WeightSource {
 public:
  explicit HostRearranged(WeightSource& inner) : inner_(inner) {}
  void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit init, int64_t fan_in,
            const WeightSlice& slice) override {
    inner_.load(name, shape, dst, init, fan_in, slice);
  }
  std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit init, int64_t fan_in,
                               const WeightSlice& slice) override {
    return inner_.load_host(name, shape, init, fan_in, slice);
  }
  std::optional<float> scalar(const std::string& name) override { return inner_.scalar(name); }

 private:
  WeightSource& inner_;
};

// Dummy gpt-oss experts written in place (WeightSource::fill_gathered, the index maps of the host's
// transposed gather, through the load-progress wrapper as a model load has it) are the host
// path's values bit for bit: gate rows from the even columns, up rows from the odd ones, down
// transposed, whole and on both ranks of TP 2.
TEST(GptOss, DummyExpertsWrittenInPlaceEqualTheHostRearrangement) {
  const ModelConfig c = load_model_config(test::family_dir("gpt_oss"));
  auto be = make_cpu_backend();
  auto plain = make_dummy_source(9, *be);
  HostRearranged host(*plain);
  auto dummy = with_load_progress(make_dummy_source(9, *be), 0, 4);
  Tensor probe = Tensor::empty({2, 3}, DType::F32, be->allocator());
  EXPECT_TRUE(dummy->fill_gathered("t", {3, 2}, WeightInit::Uniform, 2, {3, 1, 0, 2}, probe));
  EXPECT_FALSE(host.fill_gathered("t", {3, 2}, WeightInit::Uniform, 2, {3, 1, 0, 2}, probe));
  for (const auto& [rank, size] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 2}}) {
    SCOPED_TRACE(testing::Message() << "rank " << rank << " of " << size);
    const TpLayout tp = make_tp_layout(c, rank, size);
    LlamaLayerWeights in_place, rearranged;
    load_gpt_oss_layer(c, tp, *be, *dummy, "model.layers.1.", in_place);
    load_gpt_oss_layer(c, tp, *be, host, "model.layers.1.", rearranged);
    for (const auto& [a, b] : {std::pair{&in_place.moe.experts_gate_up, &rearranged.moe.experts_gate_up},
                               std::pair{&in_place.moe.experts_down, &rearranged.moe.experts_down}}) {
      ASSERT_EQ(a->shape(), b->shape());
      const float* x = a->data_as<float>();
      const std::vector<float> got(x, x + a->numel()), want(b->data_as<float>(), b->data_as<float>() + b->numel());
      EXPECT_EQ(got, want);
      EXPECT_GT(std::count_if(got.begin(), got.end(), [](float v) { return v != 0.0f; }), a->numel() / 2);
    }
  }
}

// Under expert parallelism (8 experts: 4 a rank at TP 2, 2 at TP 4) a rank's gpt-oss experts, their
// gate/up biases and their down biases (on every rank: each adds its own experts') are those
// experts' rows of the TP 1 load, whole, whether written in place or rearranged on the host.
TEST(GptOss, ExpertParallelRanksHoldTheirExpertsOfTp1) {
  const ModelConfig c = load_model_config(test::family_dir("gpt_oss"));
  auto be = make_cpu_backend();
  auto dummy = make_dummy_source(9, *be);
  HostRearranged host(*dummy);
  const int64_t H = c.hidden_size, I = c.moe.expert_intermediate;
  LlamaLayerWeights whole;
  load_gpt_oss_layer(c, make_tp_layout(c, 0, 1), *be, *dummy, "model.layers.1.", whole);
  const auto values = [](const Tensor& t) {
    return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
  };
  for (const auto& [rank, size] : {std::pair{0, 2}, std::pair{1, 2}, std::pair{3, 4}}) {
    SCOPED_TRACE(testing::Message() << "rank " << rank << " of " << size);
    const TpLayout tp = make_tp_layout(c, rank, size, true);
    const TpRange e = tp.experts();
    EXPECT_EQ(e.count, 8 / size);
    for (WeightSource* src : {static_cast<WeightSource*>(dummy.get()), static_cast<WeightSource*>(&host)}) {
      LlamaLayerWeights w;
      load_gpt_oss_layer(c, tp, *be, *src, "model.layers.1.", w);
      EXPECT_EQ(values(w.moe.experts_gate_up),
                values(whole.moe.experts_gate_up.rows(e.begin * 2 * I, e.count * 2 * I)));
      EXPECT_EQ(values(w.moe.experts_down), values(whole.moe.experts_down.rows(e.begin * H, e.count * H)));
      EXPECT_EQ(values(w.moe.experts_gate_up_bias), values(whole.moe.experts_gate_up_bias.rows(e.begin, e.count)));
      ASSERT_TRUE(w.moe.experts_down_bias.defined());
      EXPECT_EQ(values(w.moe.experts_down_bias), values(whole.moe.experts_down_bias.rows(e.begin, e.count)));
    }
  }
}

}  // namespace
}  // namespace gs
