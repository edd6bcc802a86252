// An executor that makes one request's logits NaN, the way a broken model or logits processor
// would: from its kPoisonAt-th output token, a request seeded kPoisonSeed is run with a NaN
// logit_bias entry (validation refuses one from a client), so the real runner and sampler meet
// a NaN row among the step's ordinary ones.
#pragma once
#include <atomic>
#include <deque>
#include <limits>
#include <memory>

#include "executor/executor.h"

namespace gs::test {

inline constexpr uint64_t kPoisonSeed = 666;
inline constexpr int kPoisonAt = 3;  // the marked request's logits are NaN from its 4th output token

class NanLogitsExecutor final : public Executor {
 public:
  explicit NanLogitsExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  RunnerOutput execute(const SchedulerOutput& batch) override {
    SchedulerOutput b = batch;
    poisoned_.clear();
    for (ScheduledRequest& r : b.requests)
      if (r.sample && r.params && r.params->seed == kPoisonSeed && r.num_output_tokens >= kPoisonAt) {
        poisoned_.push_back(*r.params);
        poisoned_.back().logit_bias.emplace_back(5, std::numeric_limits<float>::quiet_NaN());
        r.params = &poisoned_.back();
        if (b.requests.size() > 1) ++poisoned_in_batch;
      }
    return inner_->execute(b);
  }
  const ModelConfig& model_config() const override { return inner_->model_config(); }
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int block_size() const override { return inner_->block_size(); }
  int max_model_len() const override { return inner_->max_model_len(); }
  std::atomic<int> poisoned_in_batch{0};  // poisoned rows that shared their step with other requests

 private:
  std::unique_ptr<Executor> inner_;
  std::deque<SamplingParams> poisoned_;  // this step's (stable addresses)
};

}  // namespace gs::test
