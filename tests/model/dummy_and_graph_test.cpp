// Dummy presets (shapes, determinism, finite outputs, every architecture variant) and the
// model's graph-readiness: persistent views, and a captured forward replayed on new batches.
#include <gtest/gtest.h>

#include <cmath>

#include "model/presets.h"
#include "model_harness.h"
#include "test_paths.h"

namespace gs {
namespace {

ModelSource dummy(const std::string& preset, uint64_t seed = 0) {
  ModelSource s;
  s.dummy = true;
  s.preset = preset;
  s.seed = seed;
  return s;
}

const std::vector<int> kPrompt = {1, 400, 17, 99, 250, 3, 511, 42, 7};

TEST(Presets, RealShapesHaveTheirKnownParameterCounts) {
  EXPECT_EQ(resolve_model_config(dummy("smollm2-135m")).num_parameters(), 134515008);
  EXPECT_EQ(resolve_model_config(dummy("qwen2.5-0.5b")).num_parameters(), 494032768);
  EXPECT_EQ(resolve_model_config(dummy("llama3.2-1b")).num_parameters(), 1235814400);
  EXPECT_EQ(resolve_model_config(dummy("llama3.1-8b")).num_parameters(), 8030261248);
  EXPECT_EQ(resolve_model_config(dummy("qwen3-0.6b")).num_parameters(), 596049920);
  const ModelConfig l1b = resolve_model_config(dummy("llama3.2-1b"));
  EXPECT_TRUE(l1b.tie_word_embeddings);
  EXPECT_EQ(l1b.rope.llama3_factor, 32.0f);
  EXPECT_TRUE(resolve_model_config(dummy("qwen2.5-0.5b")).attention_bias);
  EXPECT_TRUE(resolve_model_config(dummy("qwen3-0.6b")).qk_norm);
  EXPECT_GE(list_presets().size(), 5u);
}

TEST(Presets, StoriesConfigMatchesTheTinyPreset) {
  const ModelConfig a = load_model_config(test::stories260k_dir()), b = find_preset("tiny").config;
  EXPECT_EQ(a.num_parameters(), b.num_parameters());
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.eos_token_ids, std::vector<int>{2});
}

TEST(Presets, UnknownOrMissingPresetIsAnError) {
  EXPECT_THROW(resolve_model_config(dummy("gpt5")), Error);
  EXPECT_THROW(resolve_model_config(dummy("")), Error);
  EXPECT_THROW(resolve_model_config(ModelSource{}), Error);
}

TEST(DummyWeights, DeterministicBySeedAndFinite) {
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(preset);
    const auto a = test::ModelHarness(dummy(preset, 7)).step({{0, kPrompt}});
    const auto b = test::ModelHarness(dummy(preset, 7)).step({{0, kPrompt}});
    const auto c = test::ModelHarness(dummy(preset, 8)).step({{0, kPrompt}});
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    double sq = 0;
    bool finite = true;
    for (const auto& row : a)
      for (float x : row) finite = finite && std::isfinite(x), sq += double(x) * x;
    ASSERT_TRUE(finite);
    const double rms = std::sqrt(sq / double(a.size() * a[0].size()));
    EXPECT_GT(rms, 0.05);  // activations neither vanish nor explode
    EXPECT_LT(rms, 20.0);
  }
}

TEST(DummyWeights, DirectoryGivesTheShape) {
  ModelSource s;
  s.dir = test::stories260k_dir().string();
  s.dummy = true;
  s.seed = 3;
  test::ModelHarness h(s);
  EXPECT_EQ(h.config().vocab_size, 512);
  const auto dummy_logits = h.step({{0, kPrompt}});
  ModelSource real;
  real.dir = s.dir;
  EXPECT_NE(dummy_logits, test::ModelHarness(real).step({{0, kPrompt}}));
}

// Batching must not change any request's result, for every architecture variant
// (Qwen2 biases and Qwen3 q/k norms included).
TEST(DummyWeights, BatchedRequestsMatchEachAlone) {
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(preset);
    const std::vector<int> other = {5, 6, 7};
    test::ModelHarness a(dummy(preset)), b(dummy(preset)), both(dummy(preset));
    const auto la = a.step({{0, kPrompt}}), lb = b.step({{0, other}});
    const auto lab = both.step({{1, other}, {0, kPrompt}});
    for (size_t i = 0; i < other.size(); ++i)
      for (size_t j = 0; j < lb[i].size(); ++j) ASSERT_NEAR(lab[i][j], lb[i][j], 1e-4);
    for (size_t i = 0; i < kPrompt.size(); ++i)
      for (size_t j = 0; j < la[i].size(); ++j) ASSERT_NEAR(lab[other.size() + i][j], la[i][j], 1e-4);
  }
}

// Piece i ends where attention i begins: running the pieces and attention ops one at a time,
// attention i is the only op that writes layer i's KV cache (no piece touches the cache), and
// the whole sequence gives the eager forward's logits.
TEST(LlamaModel, PiecesSplitAtEveryLayersAttention) {
  test::ModelHarness h(dummy("tiny")), whole(dummy("tiny"));
  const int layers = h.config().num_layers;
  ASSERT_EQ(h.model().num_pieces(), layers + 1);
  const ForwardInputs in = h.prepare({{0, kPrompt}});
  for (int i = 0; i < layers; ++i) {
    h.model().run_piece(i, in);
    for (int l = 0; l < layers; ++l) ASSERT_EQ(h.kv_written(l), l < i) << "after piece " << i << ", layer " << l;
    h.model().run_attention(i, in);
    for (int l = 0; l < layers; ++l) ASSERT_EQ(h.kv_written(l), l <= i) << "after attention " << i << ", layer " << l;
  }
  h.model().run_piece(layers, in);
  for (int l = 0; l < layers; ++l) EXPECT_TRUE(h.kv_written(l));
  const auto expected = whole.step({{0, kPrompt}});
  const Tensor rows = Tensor::empty({1}, DType::I32, h.backend().allocator());
  const Tensor logits = Tensor::empty({1, h.config().vocab_size}, DType::F32, h.backend().allocator());
  *rows.data_as<int>() = int(kPrompt.size()) - 1;
  h.model().compute_logits(rows, logits);
  h.backend().stream().synchronize();
  for (int j = 0; j < h.config().vocab_size; ++j)
    ASSERT_NEAR(logits.data_as<float>()[j], expected.back()[size_t(j)], 1e-5) << j;
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

// A whole forward (pieces, attention, logits) captured once at two decode requests, replayed
// for later steps with new ids, positions, slots and block tables: same tokens as eager.
TEST(LlamaModel, CapturedForwardReplaysLaterBatchesLikeEager) {
  ModelSource src;
  src.dir = test::stories260k_dir().string();
  test::ModelHarness eager(src), graphed(src);
  const std::vector<int> p0 = {1, 403, 407}, p1 = {1, 600 % 512, 9, 33, 12, 8};
  eager.step({{0, p0}, {1, p1}});
  auto first = graphed.step({{0, p0}, {1, p1}});
  int t0 = argmax(first[p0.size() - 1]), t1 = argmax(first.back());
  int e0 = t0, e1 = t1;
  std::unique_ptr<Graph> graph;
  for (int s = 0; s < 12; ++s) {
    const auto el = eager.step({{0, {e0}}, {1, {e1}}});
    const ForwardInputs in = graphed.prepare({{0, {t0}}, {1, {t1}}});
    if (!graph) {
      graphed.backend().stream().begin_capture();
      graphed.run(in);
      graph = graphed.backend().stream().end_capture();
    }
    graph->replay();
    const auto gl = graphed.read_logits(2);
    ASSERT_EQ(gl, el) << "step " << s;
    e0 = argmax(el[0]), e1 = argmax(el[1]), t0 = argmax(gl[0]), t1 = argmax(gl[1]);
  }
}

}  // namespace
}  // namespace gs
