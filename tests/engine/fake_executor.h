// FakeExecutor: a deterministic stand-in for the model that also checks the KV bookkeeping.
//
// It keeps a simulated KV cache (per slot: the position, token and prefix hash written). For
// every scheduled request it checks that the cached prefix [0, num_computed_tokens) is exactly
// the request's tokens, as written by earlier steps through its block table, then writes the
// new tokens. Its logits are a pseudo-random function of the whole token history read back
// from the cache, so any scheduling or block-table bug changes the output. It samples them with
// the real sampler on the CPU backend (penalty slots included).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "core/splitmix64.h"
#include "executor/executor.h"
#include "runner/sampling_inputs.h"

namespace gs::test {

class FakeExecutor final : public Executor {
 public:
  FakeExecutor(int vocab, int num_blocks, int block_size, int max_model_len, std::vector<int> eos = {})
      : num_blocks_(num_blocks),
        block_size_(block_size),
        max_model_len_(max_model_len),
        slots_(static_cast<size_t>(num_blocks) * block_size),
        sampler_(*cpu_, make_cpu_sampling_kernels(*cpu_), SamplerLimits{kMaxRows, vocab, kMaxRows, max_model_len}),
        logits_(Tensor::empty({kMaxRows, vocab}, DType::F32, cpu_->allocator())) {
    cfg_.vocab_size = vocab;
    cfg_.eos_token_ids = std::move(eos);
  }

  RunnerOutput execute(const SchedulerOutput& batch) override {
    ++steps;
    float* logits = logits_.data_as<float>();
    std::vector<const ScheduledRequest*> to_sample;
    for (const auto& r : batch.requests) {
      const auto& toks = *r.all_token_ids;
      const auto& blocks = *r.block_ids;
      const int end = r.num_computed_tokens + r.num_new_tokens;
      EXPECT_GE(r.num_new_tokens, 1);
      EXPECT_LE(end, static_cast<int>(toks.size()));
      EXPECT_GE(static_cast<int>(blocks.size()) * block_size_, end) << "block table too short";
      EXPECT_EQ(r.sample, end == static_cast<int>(toks.size()));
      EXPECT_EQ(r.num_output_tokens, static_cast<int>(toks.size()) - r.num_prompt_tokens);
      uint64_t h = 0x1234567;
      for (int pos = 0; pos < end; ++pos) {
        h = splitmix64(h ^ static_cast<uint64_t>(toks[pos]));
        Slot& s = slot(blocks, pos);
        if (pos >= r.num_computed_tokens) s = Slot{h, pos, toks[pos]};
        if (s.prefix != h || s.pos != pos || s.token != toks[pos]) {
          ADD_FAILURE() << "request " << r.id << ": KV slot for position " << pos << " holds another prefix (pos "
                        << s.pos << ")";
          return {};
        }
      }
      if (!r.sample) continue;
      EXPECT_LT(to_sample.size(), size_t(kMaxRows));
      for (int v = 0; v < cfg_.vocab_size; ++v)
        *logits++ = static_cast<float>(splitmix64(h + v) % 1000) / 100.0f +  // [0, 10)
                    (v == favored ? 100.0f : 0.0f);
      to_sample.push_back(&r);
    }
    RunnerOutput out;
    const int n = static_cast<int>(to_sample.size());
    inputs_.stage(sampler_, to_sample, n);
    sampler_.sample(logits_, n);
    std::vector<TokenLogprob> rows = sampler_.fetch(n);
    for (int i = 0; i < n; ++i) out.sampled.push_back(SampledToken{std::move(rows[i]), to_sample[i]->id});
    for (size_t i = 0; i < out.sampled.size(); ++i) {
      auto it = script.find(out.sampled[i].id);
      if (it != script.end() && to_sample[i]->num_output_tokens < static_cast<int>(it->second.size()))
        out.sampled[i].token = it->second[to_sample[i]->num_output_tokens];
    }
    return out;
  }

  const ModelConfig& model_config() const override { return cfg_; }
  int num_kv_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  int max_model_len() const override { return max_model_len_; }

  int steps = 0;
  int favored = -1;  // a token whose logit is raised far above the others
  // Requests (by id) whose outputs are scripted instead of sampled.
  std::map<RequestId, std::vector<int32_t>> script;

 private:
  struct Slot {
    uint64_t prefix = 0;  // hash of the tokens up to and including this one
    int pos = -1;
    int32_t token = -1;
  };
  Slot& slot(const std::vector<int32_t>& blocks, int pos) {
    return slots_[static_cast<size_t>(blocks[pos / block_size_]) * block_size_ + pos % block_size_];
  }

  static constexpr int kMaxRows = 256;
  ModelConfig cfg_;
  int num_blocks_, block_size_, max_model_len_;
  std::vector<Slot> slots_;
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  Sampler sampler_;
  SamplingInputs inputs_{kMaxRows};
  Tensor logits_;
};

}  // namespace gs::test
