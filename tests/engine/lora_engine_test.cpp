// Multi-LoRA on the CPU with stories260K: random PEFT adapters (rank 4 and 8, rsLoRA too) give
// the same greedy tokens as the model with the adapter merged offline; a batch mixing three
// adapters and the base model gives each request its tokens alone, in every graph mode, with
// fewer device slots than adapters (slots reloaded between steps) and no capture after start-up;
// attention adapters on mixture-of-experts models equal their merged weights too.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/lora_test_util.h"
#include "model/family_fixtures.h"
#include "model/lora_adapter.h"
#include "test_paths.h"

namespace gs {
namespace {

using test::AdapterSpec;

const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 403, 407, 261, 378, 432}, {1, 385, 328, 432, 261, 376, 268, 414}, {1, 300, 301}, {1, 450, 20, 33, 97, 122}};

EngineConfig base_config(const std::string& model, CUDAGraphMode mode = CUDAGraphMode::NONE) {
  EngineConfig cfg;
  cfg.model = model;
  cfg.device = "cpu";
  cfg.max_num_seqs = 8;
  cfg.max_num_batched_tokens = 64;
  cfg.compilation.cudagraph_mode = mode;
  cfg.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16};
  return cfg;
}

// Greedy tokens of each (prompt, adapter) pair, all queued at once.
std::vector<std::vector<int32_t>> generate(LLMEngine& e, const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<std::string>& loras, int max_tokens = 24) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < prompts.size(); ++i) which[e.add_request(prompts[i], p, loras[i])] = i;
  std::vector<std::vector<int32_t>> out(prompts.size());
  while (e.has_unfinished_requests())
    for (const auto& o : e.step()) {
      auto& v = out[which.at(o.id)];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  return out;
}

class LoraEngine : public ::testing::Test {
 protected:
  test::TempDir tmp;
  std::string stories = test::stories260k_dir().string();

  // Tokens with the adapter served as LoRA, and with it merged into the weights.
  std::pair<std::vector<std::vector<int32_t>>, std::vector<std::vector<int32_t>>> lora_and_merged(
      const AdapterSpec& s, const std::string& name) {
    const auto w = test::write_adapter(tmp.path() / name, s);
    test::write_merged(stories, tmp.path() / (name + "_merged"), s, w);
    EngineConfig cfg = base_config(stories);
    cfg.enable_lora = true;
    cfg.max_lora_rank = 8;
    cfg.lora_modules = {{name, (tmp.path() / name).string()}};
    LLMEngine with_lora(cfg);
    LLMEngine merged(base_config((tmp.path() / (name + "_merged")).string()));
    return {generate(with_lora, kPrompts, std::vector<std::string>(kPrompts.size(), name)),
            generate(merged, kPrompts, std::vector<std::string>(kPrompts.size(), ""))};
  }
};

TEST_F(LoraEngine, Rank4AllProjectionsEqualsMergedWeights) {
  const auto [lora, merged] = lora_and_merged(AdapterSpec{.rank = 4, .alpha = 8, .seed = 7}, "r4");
  EXPECT_EQ(lora, merged);
  LLMEngine base(base_config(stories));
  EXPECT_NE(generate(base, kPrompts, {"", "", "", ""}), lora) << "the adapter must change the output";
}

TEST_F(LoraEngine, Rank8RsLoraAttentionOnlyEqualsMergedWeights) {
  AdapterSpec s{.rank = 8, .alpha = 16, .rslora = true, .targets = {"q_proj", "v_proj", "o_proj"}, .seed = 11};
  const auto [lora, merged] = lora_and_merged(s, "r8");
  EXPECT_EQ(lora, merged);
}

// Mixture-of-experts models (the HF fixtures: qwen3_moe with a dense layer, qwen2_moe's shared
// expert, mixtral, gpt-oss's attention biases, o_proj bias and sinks): an adapter of the attention
// projections gives the tokens of the model with it merged, the experts running as without LoRA;
// an adapter of the MLP projections is refused on a sparse layer, naming it.
TEST_F(LoraEngine, MixtureOfExpertsAttentionAdaptersEqualMergedWeights) {
  for (const char* family : {"qwen3_moe", "qwen2_moe", "mixtral", "gpt_oss"}) {
    SCOPED_TRACE(family);
    const std::filesystem::path dir = test::family_dir(family);
    const ModelConfig mc = load_model_config(dir);
    const AdapterSpec s{.rank = 4, .alpha = 8, .targets = {"q_proj", "k_proj", "v_proj", "o_proj"}, .seed = 5};
    const std::string name = std::string(family) + "_attn";
    const auto w = test::write_adapter(tmp.path() / name, s, mc.num_layers, mc);
    test::write_merged(dir, tmp.path() / (name + "_merged"), s, w, mc);
    EngineConfig cfg = base_config(dir.string(), CUDAGraphMode::FULL_AND_PIECEWISE);
    cfg.enable_lora = true;
    cfg.max_lora_rank = 8;
    cfg.lora_modules = {{name, (tmp.path() / name).string()}};
    LLMEngine with_lora(cfg), merged(base_config((tmp.path() / (name + "_merged")).string()));
    LLMEngine base(base_config(dir.string()));
    const auto prompts = test::load_family_fixture(family).prompts;
    const std::vector<std::string> none(prompts.size(), "");
    const auto lora = generate(with_lora, prompts, std::vector<std::string>(prompts.size(), name));
    EXPECT_EQ(lora, generate(merged, prompts, none));
    EXPECT_NE(lora, generate(base, prompts, none)) << "the adapter must change the output";
  }
  const std::filesystem::path qwen = test::family_dir("qwen3_moe");  // layer 0 sparse, layer 1 dense
  const ModelConfig mc = load_model_config(qwen);
  test::write_adapter(tmp.path() / "mlp", AdapterSpec{.targets = {"gate_proj"}}, mc.num_layers, mc);
  try {
    load_lora_adapter("mlp", tmp.path() / "mlp", mc, 8);
    FAIL() << "an adapter of a sparse layer's MLP was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adapts the MLP of layer 0, a mixture-of-experts layer"), std::string::npos)
        << e.what();
  }
}

class LoraMixModes : public LoraEngine, public ::testing::WithParamInterface<CUDAGraphMode> {};

TEST_P(LoraMixModes, MixedBatchEqualsEachRequestAlone) {
  EngineConfig cfg = base_config(stories, GetParam());
  cfg.enable_lora = true;
  cfg.max_lora_rank = 8;
  cfg.max_loras = 2;  // three adapters in two slots: the scheduler and the slot LRU must cope
  cfg.max_cpu_loras = 3;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "a" + std::to_string(i);
    test::write_adapter(tmp.path() / name, AdapterSpec{.rank = i == 2 ? 8 : 4, .alpha = 8, .seed = uint32_t(20 + i)});
    cfg.lora_modules.emplace_back(name, (tmp.path() / name).string());
  }
  const std::vector<std::string> loras = {"a0", "", "a1", "a2"};
  LLMEngine engine(cfg);
  const auto together = generate(engine, kPrompts, loras);
  for (size_t i = 0; i < kPrompts.size(); ++i)
    EXPECT_EQ(together[i], generate(engine, {kPrompts[i]}, {loras[i]})[0])
        << "request " << i << " (" << loras[i] << ")";
  for (size_t i : {0u, 2u, 3u})  // the adapters are applied in this mode's graphs
    EXPECT_NE(together[i], generate(engine, {kPrompts[i]}, {""})[0]) << "request " << i;
  // Twice the same request mix: the second run reuses the slots and graphs.
  EXPECT_EQ(generate(engine, kPrompts, loras), together);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.graphs.graph_captures_after_startup, 0u);
  if (GetParam() != CUDAGraphMode::NONE) {
    EXPECT_GT(s.graphs.steps_full + s.graphs.steps_piecewise, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LoraMixModes,
                         ::testing::Values(CUDAGraphMode::NONE, CUDAGraphMode::PIECEWISE, CUDAGraphMode::FULL,
                                           CUDAGraphMode::FULL_DECODE_ONLY, CUDAGraphMode::FULL_AND_PIECEWISE),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_F(LoraEngine, PrefixCacheIsNotSharedAcrossAdapters) {
  EngineConfig cfg = base_config(stories);
  cfg.enable_prefix_caching = true;
  cfg.block_size = 4;
  cfg.enable_lora = true;
  test::write_adapter(tmp.path() / "x", AdapterSpec{.seed = 5});
  cfg.lora_modules = {{"x", (tmp.path() / "x").string()}};
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421};
  LLMEngine fresh(cfg);
  const auto alone = generate(fresh, {prompt}, {"x"})[0];
  LLMEngine cached(cfg);
  generate(cached, {prompt}, {""});  // the base model's blocks of this prompt are cached now
  EXPECT_EQ(generate(cached, {prompt}, {"x"})[0], alone);
  EXPECT_EQ(cached.stats().prefix_cache_hit_tokens, 0u);
}

TEST_F(LoraEngine, UnknownAdapterNameIsRefused) {
  EngineConfig cfg = base_config(stories);
  cfg.enable_lora = true;
  test::write_adapter(tmp.path() / "x", AdapterSpec{});
  cfg.lora_modules = {{"x", (tmp.path() / "x").string()}};
  LLMEngine engine(cfg);
  SamplingParams p;
  try {
    engine.add_request(kPrompts[0], p, "nope");
    FAIL() << "an unknown adapter must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.lora_names(), std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace gs
