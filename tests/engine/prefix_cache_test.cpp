// Prefix caching on the real engine (CPU): outputs with the cache equal outputs without it, across
// LoRA adapters (blocks are keyed by adapter), sliding-window models and preemption; the counters
// follow vLLM's (queries: every token of a request that looked the cache up; hits: those cached).
#include <gtest/gtest.h>

#include <map>

#include "engine/llm_engine.h"
#include "engine/lora_test_util.h"
#include "model/family_fixtures.h"
#include "stories260k_goldens.h"
#include "test_paths.h"

namespace gs {
namespace {

struct Job {
  std::vector<int32_t> prompt;
  std::string lora;
};

// Greedy tokens of each job, all queued at once; `waves` runs the same jobs again after the first
// wave finished (the later waves find its blocks cached).
std::vector<std::vector<int32_t>> run(LLMEngine& e, const std::vector<Job>& jobs, int max_tokens = 16) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < jobs.size(); ++i) which[e.add_request(jobs[i].prompt, p, jobs[i].lora)] = i;
  std::vector<std::vector<int32_t>> out(jobs.size());
  while (e.has_unfinished_requests())
    for (const auto& o : e.step()) {
      auto& v = out[which.at(o.id)];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  return out;
}

// `n` tokens in [3, vocab), the same for the same seed.
std::vector<int32_t> tokens(int n, uint32_t seed, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = 3 + int32_t((x >> 8) % uint32_t(vocab - 3));
  }
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Jobs sharing prefixes of several lengths (whole blocks and not), some repeated exactly.
std::vector<Job> shared_prefix_jobs(int vocab, const std::vector<std::string>& loras) {
  const auto sys = tokens(37, 1, vocab);
  std::vector<Job> jobs;
  for (size_t i = 0; i < 6; ++i)
    jobs.push_back({concat(sys, tokens(3 + int(i) * 5, 10 + uint32_t(i % 4), vocab)), loras[i % loras.size()]});
  jobs.push_back({sys, loras[0]});
  jobs.push_back({tokens(9, 99, vocab), loras.back()});
  return jobs;
}

// Two waves of the jobs through an engine with the cache and one without: every request's tokens
// are the same, and the cached engine hit. Returns the cached engine's stats.
EngineStats expect_cache_transparent(EngineConfig cfg, const std::vector<Job>& jobs) {
  cfg.enable_prefix_caching = false;
  LLMEngine plain(cfg);
  cfg.enable_prefix_caching = true;
  LLMEngine cached(cfg);
  for (int wave = 0; wave < 2; ++wave) {
    const auto want = run(plain, jobs), got = run(cached, jobs);
    for (size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << "job " << i << " (adapter '" << jobs[i].lora << "') wave " << wave;
  }
  const EngineStats s = cached.stats();
  EXPECT_GT(s.prefix_cache_hit_tokens, 0u);
  EXPECT_LE(s.prefix_cache_hit_tokens, s.prefix_cache_query_tokens);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(plain.stats().prefix_cache_query_tokens, 0u);
  return s;
}

TEST(PrefixCache, OnByDefault) { EXPECT_TRUE(EngineConfig{}.enable_prefix_caching); }

// Three identical 49-token prompts one after another, blocks of 16: the first finds nothing, the
// others the 3 full blocks before their last token.
TEST(PrefixCache, CountersAddUp) {
  EngineConfig cfg = test::stories_config();
  cfg.enable_prefix_caching = true;
  LLMEngine engine(cfg);
  const std::vector<Job> one = {{tokens(49, 7, 512), ""}};
  for (int i = 0; i < 3; ++i) run(engine, one, 4);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.prefix_cache_query_tokens, 3u * 49u);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 2u * 48u);
}

// Prompt logprobs need every prompt position computed: such requests neither read the cache nor count.
TEST(PrefixCache, PromptLogprobRequestsDoNotQuery) {
  EngineConfig cfg = test::stories_config();
  LLMEngine engine(cfg);
  SamplingParams p;
  p.max_tokens = 2;
  p.prompt_logprobs = 0;
  for (int i = 0; i < 2; ++i) {
    engine.add_request(tokens(40, 3, 512), p);
    while (engine.has_unfinished_requests()) engine.step();
  }
  EXPECT_EQ(engine.stats().prefix_cache_query_tokens, 0u);
  EXPECT_EQ(engine.stats().prefix_cache_hit_tokens, 0u);
}

// Adapters and the base model over the same prompts: blocks are reused only under the same adapter.
TEST(PrefixCache, SameOutputsAcrossLoraAdapters) {
  test::TempDir tmp;
  EngineConfig cfg = test::stories_config();
  cfg.block_size = 4;
  cfg.kv_cache_memory_bytes = 0;
  cfg.enable_lora = true;
  cfg.max_loras = 2;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "a" + std::to_string(i);
    test::write_adapter(tmp.path() / name, test::AdapterSpec{.seed = uint32_t(30 + i)});
    cfg.lora_modules.emplace_back(name, (tmp.path() / name).string());
  }
  const EngineStats s = expect_cache_transparent(cfg, shared_prefix_jobs(512, {"a0", "", "a1"}));
  // Wave 2 repeats every job: at least the 9 full blocks of the shared 37 tokens, per adapter.
  EXPECT_GE(s.prefix_cache_hit_tokens, 3u * 36u);
}

// A cache too small for the batch: requests are preempted and re-admitted through the cache.
TEST(PrefixCache, SameOutputsUnderPreemption) {
  EngineConfig cfg = test::stories_config();
  cfg.block_size = 4;
  cfg.max_num_seqs = 8;
  cfg.kv_cache_memory_bytes = 1280 * 4 * 40;  // 40 blocks of 4 tokens
  auto jobs = shared_prefix_jobs(512, {""});
  const EngineStats s = expect_cache_transparent(cfg, jobs);
  EXPECT_GT(s.num_preemptions, 0);
}

// Window-only models (Mistral / Qwen2 fixtures, window 24): blocks leave the window (and the
// request) while their prefix stays cached; chunked prefill.
TEST(PrefixCache, SameOutputsWithSlidingWindowModels) {
  for (const char* family : {"mistral_swa", "qwen2_swa"}) {
    SCOPED_TRACE(family);
    EngineConfig cfg;
    cfg.model = test::family_dir(family).string();
    cfg.device = "cpu";
    cfg.block_size = 4;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 32;
    std::vector<Job> jobs = shared_prefix_jobs(512, {""});
    jobs.push_back({tokens(70, 5, 512), ""});  // far past the window
    jobs.push_back({concat(tokens(70, 5, 512), tokens(6, 6, 512)), ""});
    expect_cache_transparent(cfg, jobs);
  }
}

}  // namespace
}  // namespace gs
