// LLMEngine over a fake model and the byte-level tokenizer: stop strings, stop ids, eos,
// limits, abort, validation, and outputs independent of batching and preemption.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "fake_executor.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

constexpr int kVocab = 300;  // byte-level: 0..255 bytes, 256 <s>, 257 </s>
constexpr int kEos = 257;

struct Harness {
  test::FakeExecutor* exec = nullptr;
  std::unique_ptr<LLMEngine> engine;
  Harness(int num_blocks = 64, int block_size = 4, int max_model_len = 128, int max_num_seqs = 8,
          int max_batched = 32) {
    EngineConfig cfg;
    cfg.max_num_seqs = max_num_seqs;
    cfg.max_num_batched_tokens = max_batched;
    cfg.seed = 5;
    auto e =
        std::make_unique<test::FakeExecutor>(kVocab, num_blocks, block_size, max_model_len, std::vector<int>{kEos});
    exec = e.get();
    engine = std::make_unique<LLMEngine>(cfg, std::move(e), Tokenizer::byte_level(kVocab));
  }
  // Runs to completion; returns the outputs of each request merged.
  std::map<RequestId, RequestOutput> drain() {
    std::map<RequestId, RequestOutput> all;
    for (int guard = 0; engine->has_unfinished_requests(); ++guard) {
      if (guard > 100000) {
        ADD_FAILURE() << "engine did not finish";
        break;
      }
      for (auto& o : engine->step()) {
        auto& acc = all[o.id];
        EXPECT_FALSE(acc.finished) << "output after finish for request " << o.id;
        acc.id = o.id;
        acc.new_token_ids.insert(acc.new_token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        acc.new_text += o.new_text;
        acc.logprobs.insert(acc.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
        acc.finished = o.finished;
        acc.finish_reason = o.finish_reason;
        acc.stop_reason = o.stop_reason;
        acc.num_output_tokens = o.num_output_tokens;
        acc.first_token_time = o.first_token_time;
        acc.arrival_time = o.arrival_time;
      }
    }
    auto s = engine->stats();
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total) << "KV blocks leaked";
    return all;
  }
};

std::vector<int32_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

TEST(LLMEngine, StopStringSpanningTokensIsNotEmitted) {
  Harness h;
  auto p = greedy(50);
  p.stop = {"END"};
  RequestId id = h.engine->add_request(bytes("prompt"), p);
  h.exec->script[id] = bytes("Hello, EN world END tail");
  auto out = h.drain();
  EXPECT_EQ(out[id].new_text, "Hello, EN world ");
  EXPECT_EQ(out[id].finish_reason, FinishReason::Stop);
  EXPECT_EQ(out[id].stop_reason, "END");
  EXPECT_EQ(out[id].new_token_ids.size(), std::string("Hello, EN world END").size());
}

TEST(LLMEngine, MaxTokensFinishesWithLength) {
  Harness h;
  RequestId id = h.engine->add_request(bytes("abc"), greedy(7));
  h.exec->script[id] = bytes("0123456789");
  auto out = h.drain();
  EXPECT_EQ(out[id].new_text, "0123456");
  EXPECT_EQ(out[id].finish_reason, FinishReason::Length);
  EXPECT_EQ(finish_reason_name(out[id].finish_reason), "length");
  EXPECT_GT(out[id].first_token_time, out[id].arrival_time - 1e-9);
}

TEST(LLMEngine, ContextEndFinishesWithLength) {
  Harness h(64, 4, /*max_model_len=*/10);
  RequestId id = h.engine->add_request(bytes("abcdef"), greedy(100));
  auto out = h.drain();
  EXPECT_EQ(out[id].new_token_ids.size(), 4u);
  EXPECT_EQ(out[id].finish_reason, FinishReason::Length);
}

TEST(LLMEngine, EosAndStopTokenIds) {
  Harness h;
  std::vector<int32_t> script = bytes("ab");
  script.push_back(kEos);
  script.push_back('c');
  RequestId a = h.engine->add_request(bytes("x"), greedy(10));
  auto ig = greedy(4);
  ig.ignore_eos = true;
  RequestId b = h.engine->add_request(bytes("x"), ig);
  auto st = greedy(10);
  st.stop_token_ids = {'b'};
  RequestId c = h.engine->add_request(bytes("x"), st);
  for (RequestId id : {a, b, c}) h.exec->script[id] = script;
  auto out = h.drain();
  EXPECT_EQ(out[a].new_text, "ab");
  EXPECT_EQ(out[a].finish_reason, FinishReason::Stop);
  EXPECT_EQ(out[a].stop_reason, "");
  EXPECT_EQ(out[a].new_token_ids.back(), kEos);
  EXPECT_EQ(out[b].new_text, "abc") << "eos is special: skipped in the text";
  EXPECT_EQ(out[b].finish_reason, FinishReason::Length);
  EXPECT_EQ(out[c].new_text, "a");
  EXPECT_EQ(out[c].stop_reason, std::to_string('b'));
}

TEST(LLMEngine, MinTokensMasksEos) {
  Harness h;
  auto p = greedy(5);
  p.min_tokens = 3;
  h.exec->favored = kEos;  // eos is by far the most likely token
  RequestId id = h.engine->add_request(bytes("x"), p);
  RequestId early = h.engine->add_request(bytes("x"), greedy(5));
  auto out = h.drain();
  ASSERT_EQ(out[id].new_token_ids.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(out[id].new_token_ids[i], kEos);
  EXPECT_EQ(out[id].new_token_ids[3], kEos);
  EXPECT_EQ(out[id].finish_reason, FinishReason::Stop);
  EXPECT_EQ(out[early].new_token_ids, std::vector<int32_t>{kEos});
}

TEST(LLMEngine, AbortFreesBlocksAndReportsAbort) {
  Harness h;
  RequestId a = h.engine->add_request(bytes("hello world"), greedy(50));
  RequestId b = h.engine->add_request(bytes("other"), greedy(3));
  h.engine->step();
  auto s = h.engine->stats();
  EXPECT_LT(s.kv_blocks_free, s.kv_blocks_total);
  h.engine->abort_request(a);
  h.engine->abort_request(12345);  // unknown: ignored
  auto outs = h.engine->step();
  bool saw_abort = false;
  for (auto& o : outs)
    if (o.id == a) {
      saw_abort = true;
      EXPECT_TRUE(o.finished);
      EXPECT_EQ(o.finish_reason, FinishReason::Abort);
    }
  EXPECT_TRUE(saw_abort);
  auto out = h.drain();
  EXPECT_EQ(out[b].finish_reason, FinishReason::Length);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LLMEngine, RejectsBadRequestsWithClearErrors) {
  Harness h(64, 4, /*max_model_len=*/16);
  auto& e = *h.engine;
  expect_error([&] { e.add_request(std::vector<int32_t>{}, greedy(1)); }, "prompt is empty");
  expect_error([&] { e.add_request(std::string(), greedy(1)); }, "prompt is empty");
  expect_error([&] { e.add_request(std::vector<int32_t>(16, 1), greedy(1)); },
               "the prompt has 16 tokens, but the context is 16 tokens");
  expect_error([&] { e.add_request(std::vector<int32_t>{kVocab}, greedy(1)); }, "out of range");
  auto bad = greedy(1);
  bad.top_p = 2.0f;
  expect_error([&] { e.add_request(bytes("x"), bad); }, "top_p");
  e.add_request(std::vector<int32_t>(15, 1), greedy(100));  // fits: generates 1 token
  auto out = h.drain();
  EXPECT_EQ(out.begin()->second.new_token_ids.size(), 1u);
}

TEST(LLMEngine, SmallKvCacheLowersMaxModelLen) {
  Harness h(/*num_blocks=*/3, /*block_size=*/4, /*max_model_len=*/100);
  EXPECT_EQ(h.engine->max_model_len(), 12);
  expect_error([&] { h.engine->add_request(std::vector<int32_t>(12, 1), greedy(1)); }, "--kv-cache-memory");
}

TEST(LLMEngine, LogprobsPerToken) {
  Harness h;
  auto p = greedy(3);
  p.logprobs = 2;
  RequestId id = h.engine->add_request(bytes("x"), p);
  auto out = h.drain();
  ASSERT_EQ(out[id].logprobs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[id].logprobs[i].token, out[id].new_token_ids[i]);
    EXPECT_EQ(out[id].logprobs[i].top.size(), 2u);
    EXPECT_LE(out[id].logprobs[i].logprob, 0.0f);
    EXPECT_EQ(out[id].logprobs[i].top[0].first, out[id].new_token_ids[i]) << "greedy = top-1";
  }
}

// Random workloads through the whole engine (random sampling included, with explicit seeds)
// give each request the same tokens and text as running it alone.
TEST(LLMEngine, OutputsIndependentOfBatchingAndPreemption) {
  std::mt19937 rng(99);
  int preemptions = 0;
  for (int trial = 0; trial < 15; ++trial) {
    const int block_size = 1 + static_cast<int>(rng() % 6);
    const int max_len = 40;
    const int blocks = (max_len + block_size - 1) / block_size + static_cast<int>(rng() % 20);
    Harness h(blocks, block_size, max_len, 1 + static_cast<int>(rng() % 6), 1 + static_cast<int>(rng() % 40));
    struct Job {
      std::vector<int32_t> prompt;
      SamplingParams p;
    };
    std::vector<Job> jobs(3 + rng() % 8);
    for (size_t i = 0; i < jobs.size(); ++i) {
      int len = 1 + static_cast<int>(rng() % 30);
      for (int k = 0; k < len; ++k) jobs[i].prompt.push_back('a' + static_cast<int>(rng() % 26));
      jobs[i].p.max_tokens = 1 + static_cast<int>(rng() % 20);
      jobs[i].p.temperature = (rng() % 2) ? 0.0f : 1.0f;
      jobs[i].p.seed = rng();
      jobs[i].p.stop = {"zz"};
    }
    std::map<RequestId, size_t> job_of;
    size_t next = 0;
    std::map<RequestId, RequestOutput> got;
    while (next < jobs.size() || h.engine->has_unfinished_requests()) {
      for (int k = static_cast<int>(rng() % 3); k > 0 && next < jobs.size(); --k, ++next)
        job_of[h.engine->add_request(jobs[next].prompt, jobs[next].p)] = next;
      for (auto& o : h.engine->step()) {
        auto& acc = got[o.id];
        acc.new_token_ids.insert(acc.new_token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        acc.new_text += o.new_text;
        acc.finish_reason = o.finish_reason;
      }
    }
    auto s = h.engine->stats();
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
    preemptions += s.num_preemptions;
    for (auto& [id, j] : job_of) {
      Harness solo(blocks, block_size, max_len, 1, 4096);
      RequestId sid = solo.engine->add_request(jobs[j].prompt, jobs[j].p);
      auto ref = solo.drain()[sid];
      EXPECT_EQ(got[id].new_token_ids, ref.new_token_ids) << "trial " << trial << " job " << j;
      EXPECT_EQ(got[id].new_text, ref.new_text);
      EXPECT_EQ(got[id].finish_reason, ref.finish_reason);
    }
  }
  EXPECT_GT(preemptions, 0) << "no trial forced a preemption";
}

}  // namespace
}  // namespace gs

namespace gs {
namespace {

// Random aborts (of waiting, running, preempted and already finished requests) in a random
// workload: every request ends exactly once, and every block comes back.
TEST(LLMEngine, RandomAbortsLoseNothingAndFreeEverything) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Harness h(12, 2, 20, 4, 8);
    std::vector<RequestId> ids;
    std::map<RequestId, int> finished;
    for (int step = 0; step < 400 && (ids.size() < 30 || h.engine->has_unfinished_requests()); ++step) {
      if (ids.size() < 30 && rng() % 2) {
        std::vector<int32_t> prompt(1 + rng() % 15, 'a' + static_cast<int>(rng() % 26));
        ids.push_back(h.engine->add_request(prompt, greedy(1 + static_cast<int>(rng() % 10))));
      }
      if (!ids.empty() && rng() % 4 == 0) h.engine->abort_request(ids[rng() % ids.size()]);
      for (auto& o : h.engine->step())
        if (o.finished) ++finished[o.id];
    }
    EXPECT_FALSE(h.engine->has_unfinished_requests());
    for (RequestId id : ids) EXPECT_EQ(finished[id], 1) << "trial " << trial << " request " << id;
    auto s = h.engine->stats();
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
    EXPECT_EQ(s.num_running + s.num_waiting, 0);
  }
}

}  // namespace
}  // namespace gs
