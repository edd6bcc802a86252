// The persistent decode kernel (ops/decode_step.h) against the layered forward it replaces, on
// dummy weights of real model shapes (head dims 64 and 128, GQA groups of 2 to 7, q/k/v bias,
// Qwen3's q/k norm): requests with contexts of 3 to 1000 tokens (one to many context splits)
// prefilled by the layered path, then decode steps of 1, 2, 3 (+1 padding row) and 4 requests, each
// step run by both paths on the same cache and teacher-forced with the layered path's greedy
// tokens. Logits within bf16 tolerance of the layered path's, the same greedy tokens, and the
// same KV cache rows written. Then through the ModelRunner: requests arriving over time, served in
// FULL_AND_PIECEWISE with the kernel as the body of the decode graphs of 1..4 requests (replayed
// with changing inputs and padding rows), against the same run without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "attention/cuda/cuda_attention.h"
#include "cuda_test_util.h"
#include "model/model_factory.h"
#include "ops/cuda/cuda_backend.h"
#include "runner/model_runner.h"
#include "runner/serving_sim.h"

namespace gs {
namespace {

constexpr int kBlock = 16;
constexpr int kMaxTokens = 1024;

KernelOptions persistent_on() {
  KernelOptions o;
  o.decode.persistent_max_tokens = 4;
  return o;
}

class Harness {
 public:
  Harness(const std::string& preset, const std::vector<int>& contexts)
      : be_(make_cuda_backend(0, DType::BF16, persistent_on())), ctx_(contexts) {
    ModelSource src;
    src.dummy = true, src.preset = preset, src.seed = 7;
    cfg_ = resolve_model_config(src);
    attn_ = make_cuda_attention(*be_, attention_shape(cfg_));
    model_ = create_model(cfg_, src, *be_, *attn_, kMaxTokens);
    R_ = int(ctx_.size());
    bpr_ = (*std::max_element(ctx_.begin(), ctx_.end()) + 64) / kBlock + 1;
    const int blocks = R_ * bpr_;
    // Each request's blocks are a shuffled set of the pool (block tables are not contiguous).
    std::vector<int32_t> perm(static_cast<size_t>(blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
    table_.assign(perm.begin(), perm.end());
    auto dev = [&](Shape s, DType t) { return Tensor::empty(s, t, be_->allocator()); };
    const Shape kv{blocks, kBlock, cfg_.num_kv_heads, cfg_.head_dim};
    std::vector<KVCacheLayer> layers;
    for (int l = 0; l < cfg_.num_layers; ++l) {
      layers.push_back({dev(kv, DType::BF16), dev(kv, DType::BF16)});
      be_->fill_zero(layers.back().k), be_->fill_zero(layers.back().v);
    }
    cache_ = layers;
    model_->bind_kv_cache(std::move(layers));
    ids_ = dev({kMaxTokens}, DType::I32), pos_ = dev({kMaxTokens}, DType::I32), rows_ = dev({kMaxTokens}, DType::I32);
    md_.query_start_loc = dev({kMaxTokens + 1}, DType::I32), md_.seq_lens = dev({R_ + 1}, DType::I32);
    md_.block_table = dev({R_ + 1, bpr_}, DType::I32), md_.slot_mapping = dev({kMaxTokens}, DType::I32);
    md_.block_size = kBlock, md_.max_blocks_per_req = bpr_;
    logits_ = dev({kMaxTokens, cfg_.vocab_size}, DType::F32);
  }

  const ModelConfig& config() const { return cfg_; }

  // Prefills request r's prompt of ctx_[r] tokens (the layered path); returns its last token's argmax.
  int32_t prefill(int r) {
    const int n = ctx_[size_t(r)];
    std::mt19937 rng(uint32_t(100 + r));
    std::vector<int32_t> ids(static_cast<size_t>(n)), pos(ids), slots(ids);
    for (int i = 0; i < n; ++i)
      ids[size_t(i)] = int32_t(rng() % uint32_t(cfg_.vocab_size)), pos[size_t(i)] = i, slots[size_t(i)] = slot(r, i);
    put(ids_, ids), put(pos_, pos), put(md_.slot_mapping, slots), put(md_.query_start_loc, {0, n});
    put(md_.seq_lens, {n}), put(md_.block_table, row_of(r));
    attn_->plan_eager(md_, n);
    md_.num_reqs = 1;
    model_->forward(
        {.num_tokens = n, .input_ids = ids_.rows(0, n), .positions = pos_.rows(0, n), .attn = &md_, .lora_slots = {}});
    put(rows_, {n - 1});
    return argmax(logits(1)[0]);
  }

  // One decode step of requests reqs (new tokens `tokens`) plus `pad` padding rows, by the layered
  // forward or the persistent step; the logits of every row.
  std::vector<std::vector<float>> decode(const std::vector<int>& reqs, const std::vector<int32_t>& tokens, int pad,
                                         bool persistent) {
    const int n = int(reqs.size()), T = n + pad;
    std::vector<int32_t> pos, slots, qsl, lens, bt, rows;
    for (int i = 0; i < T; ++i) {
      const int r = i < n ? reqs[size_t(i)] : -1;
      pos.push_back(r >= 0 ? ctx_[size_t(r)] : 0);
      slots.push_back(r >= 0 ? slot(r, ctx_[size_t(r)]) : -1);
      lens.push_back(r >= 0 ? ctx_[size_t(r)] + 1 : 0);
      const std::vector<int32_t> row = r >= 0 ? row_of(r) : std::vector<int32_t>(size_t(bpr_), 0);
      bt.insert(bt.end(), row.begin(), row.end());
      rows.push_back(i);
    }
    for (int i = 0; i <= T; ++i) qsl.push_back(std::min(i, n));
    std::vector<int32_t> ids(tokens);
    ids.resize(size_t(T), 0);
    put(ids_, ids), put(pos_, pos), put(md_.slot_mapping, slots), put(md_.query_start_loc, qsl);
    put(md_.seq_lens, lens), put(md_.block_table, bt), put(rows_, rows);
    md_.num_reqs = n;
    attn_->plan_eager(md_, 1);
    const ForwardInputs in{
        .num_tokens = T, .input_ids = ids_.rows(0, T), .positions = pos_.rows(0, T), .attn = &md_, .lora_slots = {}};
    if (persistent)
      EXPECT_TRUE(model_->run_decode_step(in)) << "the model has no persistent decode step for " << T << " tokens";
    else
      model_->forward(in);
    return logits(T);
  }

  void advance(const std::vector<int>& reqs) {
    for (int r : reqs) ++ctx_[size_t(r)];
  }

  // Layer l's cache rows (K then V) of request r's position p.
  std::vector<float> cache_row(int l, int r, int p) {
    const int64_t w = int64_t(cfg_.num_kv_heads) * cfg_.head_dim, s = slot(r, p);
    std::vector<float> out = test::read(*be_, cache_[size_t(l)].k.reshape({-1, w}).rows(s, 1));
    const std::vector<float> v = test::read(*be_, cache_[size_t(l)].v.reshape({-1, w}).rows(s, 1));
    out.insert(out.end(), v.begin(), v.end());
    return out;
  }

  int context(int r) const { return ctx_[size_t(r)]; }

  static int32_t argmax(const std::vector<float>& v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
  }

 private:
  int slot(int r, int p) const { return table_[size_t(r * bpr_ + p / kBlock)] * kBlock + p % kBlock; }
  std::vector<int32_t> row_of(int r) const {
    return {table_.begin() + int64_t(r) * bpr_, table_.begin() + int64_t(r + 1) * bpr_};
  }
  void put(const Tensor& dst, const std::vector<int32_t>& v) {
    staged_.push_back(v);
    be_->copy(dst.prefix({int64_t(v.size())}),
              Tensor::wrap(staged_.back().data(), {int64_t(v.size())}, DType::I32, Device::cpu()));
  }
  std::vector<std::vector<float>> logits(int n) {
    model_->compute_logits(rows_.rows(0, n), logits_.rows(0, n));
    std::vector<float> host(size_t(n) * size_t(cfg_.vocab_size));
    be_->copy(Tensor::wrap(host.data(), {n, cfg_.vocab_size}, DType::F32, Device::cpu()), logits_.rows(0, n));
    be_->stream().synchronize();
    staged_.clear();
    std::vector<std::vector<float>> out;
    for (int i = 0; i < n; ++i)
      out.emplace_back(host.begin() + int64_t(i) * cfg_.vocab_size, host.begin() + int64_t(i + 1) * cfg_.vocab_size);
    return out;
  }

  std::unique_ptr<Backend> be_;
  ModelConfig cfg_;
  std::unique_ptr<AttentionBackend> attn_;
  std::unique_ptr<PiecewiseModel> model_;
  std::vector<int> ctx_;
  int R_ = 0, bpr_ = 0;
  std::vector<int32_t> table_;
  std::vector<KVCacheLayer> cache_;
  Tensor ids_, pos_, rows_, logits_;
  AttentionMetadata md_;
  std::vector<std::vector<int32_t>> staged_;
};

class PersistentDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(PersistentDecode, MatchesTheLayeredForward) {
  GS_REQUIRE_GPU();
  const std::vector<int> contexts{3, 17, 64, 65, 130, 300, 700, 1000};
  Harness h(GetParam(), contexts);
  std::vector<int32_t> next;
  for (int r = 0; r < int(contexts.size()); ++r) next.push_back(h.prefill(r));
  // (requests, padding rows): one request, two, three + a padding row (the 4-row kernel), four.
  const std::vector<std::pair<std::vector<int>, int>> batches{{{7}, 0}, {{3, 5}, 0}, {{1, 4, 6}, 1}, {{0, 2, 5, 7}, 0}};
  int agree = 0, total = 0;
  double worst = 0;
  for (const auto& [reqs, pad] : batches) {
    for (int step = 0; step < 3; ++step) {
      std::vector<int32_t> tokens;
      for (int r : reqs) tokens.push_back(next[size_t(r)]);
      const auto ref = h.decode(reqs, tokens, pad, false);
      const int last = h.config().num_layers - 1;
      std::vector<std::vector<float>> ref_rows;
      for (int r : reqs) ref_rows.push_back(h.cache_row(last, r, h.context(r)));
      const auto got = h.decode(reqs, tokens, pad, true);
      for (size_t i = 0; i < reqs.size(); ++i) {
        const double e = test::rel_l2(got[i], ref[i]);
        worst = std::max(worst, e);
        EXPECT_LT(e, 2e-2) << "request " << reqs[i] << " step " << step;
        EXPECT_LT(test::rel_l2(h.cache_row(last, reqs[i], h.context(reqs[i])), ref_rows[i]), 2e-2)
            << "the new token's K/V of request " << reqs[i] << " in the last layer";
        agree += Harness::argmax(got[i]) == Harness::argmax(ref[i]);
        ++total;
        next[size_t(reqs[i])] = Harness::argmax(ref[i]);
      }
      h.advance(reqs);
    }
  }
  std::printf("[persistent-decode] %-14s greedy tokens equal %d/%d, logits rel-L2 max %.5f\n", GetParam().c_str(),
              agree, total, worst);
  EXPECT_GE(agree * 10, total * 9);
}

// Greedy outputs of 4 requests (prompts of 9 to 300 tokens, arriving over the first steps) served
// with the persistent kernel at most `persistent` requests (0: never), and the steps run as FULL.
std::pair<test::SimResult, uint64_t> serve(const std::string& preset, int persistent) {
  RunnerConfig c;
  c.device = "cuda", c.dtype = "bfloat16", c.load_format = "dummy", c.preset = preset, c.seed = 3;
  c.max_num_seqs = 4, c.max_num_batched_tokens = 512, c.max_model_len = 1024;
  c.kv_cache_memory_bytes = size_t(256) << 20;
  c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  c.kernel_options.decode.persistent_max_tokens = persistent;
  ModelRunner runner(c);
  std::vector<test::SimRequest> reqs;
  std::mt19937 rng(11);
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt(size_t(std::vector<int>{9, 40, 300, 120}[size_t(i)]));
    for (int32_t& t : prompt) t = int32_t(rng() % 1000);
    reqs.push_back(test::greedy_request(prompt, 12, i));
  }
  test::SimResult res = test::simulate(runner, reqs, 512);
  return {res, runner.stats().steps_full};
}

TEST(PersistentDecodeRunner, ServesTheLayeredPathsTokensInFullGraphs) {
  GS_REQUIRE_GPU();
  const auto [with, full_with] = serve("qwen3-0.6b", 4);
  const auto [without, full_without] = serve("qwen3-0.6b", 0);
  EXPECT_GT(full_with, 0u) << "no decode step ran in a FULL graph";
  int same = 0, total = 0;
  for (size_t i = 0; i < with.outputs.size(); ++i) {
    ASSERT_EQ(with.outputs[i].size(), without.outputs[i].size()) << "request " << i;
    size_t p = 0;
    while (p < with.outputs[i].size() && with.outputs[i][p] == without.outputs[i][p]) ++p;
    same += int(p), total += int(with.outputs[i].size());
  }
  std::printf(
      "[persistent-decode] runner, qwen3-0.6b: %d/%d greedy tokens equal before the first difference, "
      "%llu FULL steps\n",
      same, total, static_cast<unsigned long long>(full_with));
  EXPECT_GE(same * 4, total * 3);
}

INSTANTIATE_TEST_SUITE_P(Presets, PersistentDecode, ::testing::Values("smollm2-135m", "qwen2.5-0.5b", "qwen3-0.6b"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace_if(
                               s.begin(), s.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return s;
                         });

}  // namespace
}  // namespace gs
