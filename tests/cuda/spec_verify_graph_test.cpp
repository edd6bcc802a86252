// Graph-support honesty for speculative decoding on the GPU (docs/CUDA_GRAPHS.md §7): the CUDA
// attention backend declares ALWAYS, so verification batches of (num_reqs, 1 + k) replay a
// FULL graph. One such graph, captured once at start-up, is replayed on contexts of different
// lengths, tokens and block tables, and must give exactly what an eager runner gives.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "cuda_test_util.h"
#include "runner/model_runner.h"
#include "test_paths.h"

namespace gs {
namespace {

constexpr int kReqs = 4, kSpec = 3, kQ = 1 + kSpec, kBlocksPerReq = 24, kBlockSize = 16;

RunnerConfig verify_config(CUDAGraphMode mode) {
  RunnerConfig c;
  c.model = test::stories260k_dir().string();
  c.device = "cuda";
  c.max_num_seqs = kReqs;
  c.max_num_batched_tokens = 512;
  c.block_size = kBlockSize;
  c.kv_cache_memory_bytes = size_t(16) << 20;
  c.speculative = SpeculativeConfig::parse(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
  c.compilation.cudagraph_mode = mode;
  c.compilation.cudagraph_capture_sizes = {kReqs * kQ};  // exactly one uniform verification key
  return c;
}

struct Seq {
  std::vector<int32_t> tokens, blocks, proposals;
  int computed = 0, prompt = 0;
};

ScheduledRequest scheduled(Seq& s, RequestId id, const SamplingParams& p) {
  const int n = int(s.tokens.size()) - s.computed + int(s.proposals.size());
  return {.id = id,
          .all_token_ids = &s.tokens,
          .num_prompt_tokens = s.prompt,
          .num_computed_tokens = s.computed,
          .num_new_tokens = n,
          .block_ids = &s.blocks,
          .sample = true,
          .params = &p,
          .seed = id,
          .num_output_tokens = int(s.tokens.size()) - s.prompt,
          .spec_token_ids = &s.proposals};
}

// One step of every sequence on `runner`; returns each one's emitted tokens.
std::vector<std::vector<int32_t>> step(ModelRunner& runner, std::vector<Seq>& seqs, const SamplingParams& p) {
  SchedulerOutput so;
  for (size_t i = 0; i < seqs.size(); ++i) so.requests.push_back(scheduled(seqs[i], i, p));
  const RunnerOutput out = runner.execute(so);
  std::vector<std::vector<int32_t>> emitted(seqs.size());
  for (const SampledToken& t : out.sampled) emitted[t.id].push_back(t.token);
  return emitted;
}

// The greedy continuation of each sequence's prompt by plain decode steps (no speculation).
std::vector<std::vector<int32_t>> plain_greedy(std::vector<Seq> seqs, int n, const SamplingParams& p) {
  RunnerConfig c = verify_config(CUDAGraphMode::NONE);
  c.speculative = {};
  ModelRunner plain(c);
  std::vector<std::vector<int32_t>> out(seqs.size());
  for (int i = 0; i < n; ++i) {
    const auto emitted = step(plain, seqs, p);
    for (size_t r = 0; r < seqs.size(); ++r) {
      seqs[r].computed = int(seqs[r].tokens.size());
      seqs[r].tokens.push_back(emitted[r].at(0));
      out[r].push_back(emitted[r].at(0));
    }
  }
  return out;
}

TEST(CudaSpecVerify, OneUniformGraphReplaysOnDifferentContextsAsEager) {
  GS_REQUIRE_GPU();
  ModelRunner graphs(verify_config(CUDAGraphMode::FULL_AND_PIECEWISE)), eager(verify_config(CUDAGraphMode::NONE));
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::mt19937 rng(7);
  constexpr int kSteps = 12;
  int accepted = 0, verifications = 0;
  for (int round = 0; round < 3; ++round) {  // new contexts: lengths, tokens and block tables change
    std::vector<Seq> seqs(kReqs);
    for (int r = 0; r < kReqs; ++r) {
      Seq& s = seqs[r];
      s.prompt = 3 + int(rng() % 120);
      s.tokens.push_back(1);
      for (int t = 1; t < s.prompt; ++t) s.tokens.push_back(int32_t(rng() % 512));
      const int base = ((round + r) % kReqs) * kBlocksPerReq;  // another slot of the cache each round
      for (int b = 0; b < kBlocksPerReq; ++b) s.blocks.push_back(base + b);
    }
    // Proposals are the plain greedy continuation, one of them spoiled in most steps (at a
    // position that moves), so runs are accepted in full, in part and not at all.
    const auto truth = plain_greedy(seqs, 1 + kSteps * kQ, greedy);
    auto a = step(graphs, seqs, greedy);
    ASSERT_EQ(a, step(eager, seqs, greedy)) << "prefill, round " << round;
    for (int v = 0; v < kSteps; ++v) {
      for (int r = 0; r < kReqs; ++r) {
        Seq& s = seqs[r];
        s.tokens.insert(s.tokens.end(), a[r].begin(), a[r].end());
        s.computed = int(s.tokens.size()) - 1;
        const int out = int(s.tokens.size()) - s.prompt;
        s.proposals.assign(truth[r].begin() + out, truth[r].begin() + out + kSpec);
        const int spoil = (v + r + round) % (kQ + 1);
        if (spoil < kSpec) s.proposals[spoil] = (s.proposals[spoil] + 1) % 512;
      }
      a = step(graphs, seqs, greedy);
      ASSERT_EQ(a, step(eager, seqs, greedy)) << "round " << round << " verification " << v;
      for (int r = 0; r < kReqs; ++r) {
        const int out = int(seqs[r].tokens.size()) - seqs[r].prompt;
        const std::vector<int32_t> want(truth[r].begin() + out, truth[r].begin() + out + int(a[r].size()));
        EXPECT_EQ(a[r], want) << "speculation changed the greedy tokens, round " << round << " request " << r;
        accepted += int(a[r].size()) - 1;
      }
      verifications += kReqs;
    }
  }
  const RunnerStats g = graphs.stats();
  EXPECT_EQ(g.steps_full, 3u * kSteps);  // every verification replayed the one FULL graph
  EXPECT_EQ(g.graph_captures_after_startup, 0u);
  EXPECT_GT(accepted, verifications);  // more than one proposal per verification on average
  EXPECT_LT(accepted, verifications * kSpec);
  std::printf("verification graph vs eager: %d of %d proposals accepted\n", accepted, verifications * kSpec);
}

}  // namespace
}  // namespace gs
