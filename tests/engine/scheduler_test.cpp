// Scheduler property tests over a fake model: random arrivals, lengths and budgets (tiny KV
// caches force preemption). Every request must finish with exactly the tokens it produces
// when run alone, budgets must hold at every step, and every KV block must be free at the end.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>

#include "engine/scheduler.h"
#include "fake_executor.h"

namespace gs {
namespace {

struct Spec {
  int arrival_step = 0;
  std::vector<int32_t> prompt;
  int max_tokens = 1;
  SamplingParams params;
};

struct Budget {
  int num_blocks, block_size, max_num_seqs, max_num_batched_tokens, max_model_len;
  bool prefix_caching = false;
};

constexpr int kVocab = 97;

// Runs `specs` through a Scheduler + FakeExecutor; returns each request's output tokens.
std::vector<std::vector<int32_t>> run(const std::vector<Spec>& specs, const Budget& b, int* preemptions = nullptr,
                                      uint64_t* hits = nullptr) {
  test::FakeExecutor exec(kVocab, b.num_blocks, b.block_size, b.max_model_len);
  BlockPool pool(b.num_blocks, b.block_size);
  Scheduler sched({b.max_num_seqs, b.max_num_batched_tokens, b.prefix_caching}, pool);
  std::vector<std::unique_ptr<Request>> reqs;
  std::vector<std::vector<int32_t>> outputs(specs.size());
  size_t next = 0, finished = 0;
  for (int step = 0; finished < specs.size(); ++step) {
    for (; next < specs.size() && specs[next].arrival_step <= step; ++next) {
      auto r = std::make_unique<Request>();
      r->id = next + 1;
      r->arrival = next;
      r->tokens = specs[next].prompt;
      r->num_prompt_tokens = static_cast<int>(r->tokens.size());
      r->params = specs[next].params;
      r->seed = 1000 + next;  // a request's seed does not depend on the batch
      sched.add(r.get());
      reqs.push_back(std::move(r));
    }
    if (sched.empty()) continue;
    SchedulerOutput out = sched.schedule();
    EXPECT_FALSE(out.requests.empty()) << "no progress at step " << step;
    EXPECT_LE(out.total_tokens(), b.max_num_batched_tokens);
    EXPECT_LE(static_cast<int>(out.requests.size()), b.max_num_seqs);
    EXPECT_LE(sched.num_running(), b.max_num_seqs);
    std::set<RequestId> ids;
    for (const auto& s : out.requests) EXPECT_TRUE(ids.insert(s.id).second) << "scheduled twice";
    RunnerOutput res = exec.execute(out);
    sched.on_step_executed();
    if (::testing::Test::HasFailure()) return outputs;
    size_t k = 0;
    for (const auto& s : out.requests) {
      if (!s.sample) continue;
      Request& r = *reqs[s.id - 1];
      r.tokens.push_back(res.sampled.at(k++).token);
      const size_t i = s.id - 1;
      if (r.num_output_tokens() >= specs[i].max_tokens || r.num_tokens() >= b.max_model_len) {
        outputs[i].assign(r.tokens.begin() + r.num_prompt_tokens, r.tokens.end());
        sched.finish(&r);
        ++finished;
      }
    }
    if (step > 100000) {
      ADD_FAILURE() << "not finished after 100000 steps";
      break;
    }
  }
  EXPECT_TRUE(sched.empty());
  EXPECT_EQ(pool.num_free(), pool.num_blocks()) << "KV blocks leaked";
  if (preemptions) *preemptions = sched.num_preemptions();
  if (hits) *hits += sched.prefix_cache_hit_tokens();
  return outputs;
}

std::vector<Spec> random_specs(std::mt19937& rng, int n, int max_prompt, int max_out, int max_model_len) {
  std::vector<Spec> specs(n);
  int t = 0;
  for (auto& s : specs) {
    t += static_cast<int>(rng() % 3);
    s.arrival_step = t;
    int len = 1 + static_cast<int>(rng() % std::min(max_prompt, max_model_len - 1));
    // Half the prompts share a common beginning (prefix caching hits).
    for (int i = 0; i < len; ++i)
      s.prompt.push_back(static_cast<int32_t>(rng() % 2 ? (i * 7) % kVocab : rng() % kVocab));
    if (rng() % 2)
      for (int i = 0; i < len; ++i) s.prompt[i] = (i * 7) % kVocab;
    s.max_tokens = 1 + static_cast<int>(rng() % max_out);
    if (rng() % 2) {
      s.params.temperature = 0.0f;
    } else {
      s.params.temperature = 0.8f;
      s.params.top_k = static_cast<int>(rng() % 20);
    }
  }
  return specs;
}

TEST(Scheduler, OutputsMatchStandaloneUnderRandomBudgets) {
  std::mt19937 rng(2024);
  int total_preemptions = 0;
  uint64_t total_hits = 0;
  for (int trial = 0; trial < 120; ++trial) {
    Budget b;
    b.prefix_caching = trial % 2 == 1;
    b.block_size = 1 + static_cast<int>(rng() % 8);
    b.max_model_len = 24 + static_cast<int>(rng() % 40);
    // From barely one max-length request up to plenty.
    int min_blocks = (b.max_model_len + b.block_size - 1) / b.block_size;
    b.num_blocks = min_blocks + static_cast<int>(rng() % (3 * min_blocks));
    b.max_num_seqs = 1 + static_cast<int>(rng() % 8);
    b.max_num_batched_tokens = 1 + static_cast<int>(rng() % 64);
    auto specs = random_specs(rng, 4 + static_cast<int>(rng() % 12), 40, 30, b.max_model_len);
    int preemptions = 0;
    auto together = run(specs, b, &preemptions, &total_hits);
    total_preemptions += preemptions;
    ASSERT_FALSE(::testing::Test::HasFailure()) << "trial " << trial;
    Budget alone{b.num_blocks, b.block_size, 1, 4096, b.max_model_len};
    for (size_t i = 0; i < specs.size(); ++i) {
      Spec s = specs[i];
      s.arrival_step = 0;
      // Same seed as in the batch: index i in `run` -> pass it at the same position.
      std::vector<Spec> one(i + 1, Spec{0, {1}, 1, {}});
      one[i] = s;
      auto solo = run(one, alone);
      EXPECT_EQ(together[i], solo[i]) << "trial " << trial << " request " << i;
    }
  }
  EXPECT_GT(total_preemptions, 0) << "the budgets never forced a preemption";
  EXPECT_GT(total_hits, 0u) << "prefix caching never hit";
}

TEST(Scheduler, ChunkedPrefillRespectsTheTokenBudget) {
  Budget b{64, 4, 4, 8, 200};
  std::vector<Spec> specs(3);
  for (auto& s : specs) {
    s.prompt.assign(30, 5);
    s.max_tokens = 3;
    s.params.temperature = 0.0f;
  }
  auto out = run(specs, b);
  for (auto& o : out) EXPECT_EQ(o.size(), 3u);
}

TEST(Scheduler, RunningRequestsGoFirstAndAdmissionIsFcfs) {
  BlockPool pool(100, 4);
  Scheduler sched({2, 16}, pool);
  Request a, b, c;
  for (Request* r : {&a, &b, &c}) {
    r->id = r == &a ? 1 : r == &b ? 2 : 3;
    r->arrival = r->id;
    r->tokens.assign(10, 1);
    r->num_prompt_tokens = 10;
  }
  sched.add(&c);
  sched.add(&a);
  sched.add(&b);
  auto s1 = sched.schedule();  // a: 10 tokens, b: 6 (chunk), c waits (max_num_seqs 2)
  ASSERT_EQ(s1.requests.size(), 2u);
  EXPECT_EQ(s1.requests[0].id, 1u);
  EXPECT_EQ(s1.requests[0].num_new_tokens, 10);
  EXPECT_TRUE(s1.requests[0].sample);
  EXPECT_EQ(s1.requests[1].id, 2u);
  EXPECT_EQ(s1.requests[1].num_new_tokens, 6);
  EXPECT_FALSE(s1.requests[1].sample);
  EXPECT_EQ(sched.num_waiting(), 1);
  a.tokens.push_back(7);
  auto s2 = sched.schedule();  // a decodes first, then b's remaining 4 tokens
  ASSERT_EQ(s2.requests.size(), 2u);
  EXPECT_EQ(s2.requests[0].id, 1u);
  EXPECT_EQ(s2.requests[0].num_new_tokens, 1);
  EXPECT_EQ(s2.requests[0].num_computed_tokens, 10);
  EXPECT_EQ(s2.requests[1].id, 2u);
  EXPECT_EQ(s2.requests[1].num_new_tokens, 4);
  sched.finish(&a);
  sched.finish(&b);
  auto s3 = sched.schedule();
  ASSERT_EQ(s3.requests.size(), 1u);
  EXPECT_EQ(s3.requests[0].id, 3u);
  sched.finish(&c);
  EXPECT_EQ(pool.num_free(), 100);
}

TEST(Scheduler, PreemptsTheNewestRunningRequest) {
  BlockPool pool(4, 4);  // 16 tokens
  Scheduler sched({4, 64}, pool);
  Request a, b;
  a.id = 1, a.arrival = 1, b.id = 2, b.arrival = 2;
  a.tokens.assign(8, 1);
  b.tokens.assign(8, 2);
  a.num_prompt_tokens = b.num_prompt_tokens = 8;
  sched.add(&a);
  sched.add(&b);
  EXPECT_EQ(sched.schedule().requests.size(), 2u);
  EXPECT_EQ(pool.num_free(), 0);
  a.tokens.push_back(3);
  b.tokens.push_back(3);
  auto s = sched.schedule();  // a needs a 3rd block: b is preempted
  ASSERT_EQ(s.requests.size(), 1u);
  EXPECT_EQ(s.requests[0].id, 1u);
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(b.status, RequestStatus::Waiting);
  EXPECT_EQ(b.blocks.num_blocks(), 0);
  sched.finish(&a);
  auto s2 = sched.schedule();  // b recomputes prompt + its generated token
  ASSERT_EQ(s2.requests.size(), 1u);
  EXPECT_EQ(s2.requests[0].id, 2u);
  EXPECT_EQ(s2.requests[0].num_new_tokens, 9);
  EXPECT_EQ(s2.requests[0].num_output_tokens, 1);
  sched.finish(&b);
  EXPECT_EQ(pool.num_free(), 4);
}

}  // namespace
}  // namespace gs
