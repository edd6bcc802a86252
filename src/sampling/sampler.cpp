// Implements sampling/sampler.h (Sampler).
#include "sampling/sampler.h"

#include <algorithm>

#include "core/error.h"

namespace gs {
namespace {

constexpr int kRowWords = int(sizeof(SamplingRow) / 4);

template <typename T>
Tensor host_i32(std::span<const T> v) {
  static_assert(sizeof(T) % 4 == 0);
  return Tensor::wrap(const_cast<T*>(v.data()), {int64_t(v.size() * sizeof(T) / 4)}, DType::I32, Device::cpu());
}

}  // namespace

Sampler::Sampler(Backend& backend, std::unique_ptr<SamplingKernels> kernels, const SamplerLimits& limits)
    : backend_(backend), kernels_(std::move(kernels)), limits_(limits), mask_words_((limits.vocab + 31) / 32) {
  GS_CHECK(limits.max_rows >= 1 && limits.vocab >= 1 && limits.num_slots >= 1 && limits.max_tokens >= 1,
           "sampler limits must be positive (rows {}, vocab {}, slots {}, tokens {})", limits.max_rows, limits.vocab,
           limits.num_slots, limits.max_tokens);
  Allocator& a = backend.allocator();
  const int64_t R = limits.max_rows;
  rows_ = Tensor::empty({R * kRowWords}, DType::I32, a);
  adjustments_ = Tensor::empty({R * kMaxAdjustmentsPerRow * 2}, DType::I32, a);
  counts_ = Tensor::empty({int64_t(limits.num_slots), limits.vocab}, DType::I32, a);
  prompt_mask_ = Tensor::empty({int64_t(limits.num_slots), mask_words_}, DType::I32, a);
  bitmask_ = Tensor::empty({R, mask_words_}, DType::I32, a);
  slot_tokens_ = Tensor::empty({int64_t(limits.max_tokens)}, DType::I32, a);
  sampled_ = Tensor::empty({R}, DType::I32, a);
  logprob_ = Tensor::empty({R}, DType::F32, a);
  top_ids_ = Tensor::empty({R, kMaxTopLogprobs}, DType::I32, a);
  top_lps_ = Tensor::empty({R, kMaxTopLogprobs}, DType::F32, a);
  for (const Tensor* t : {&rows_, &adjustments_, &counts_, &prompt_mask_, &sampled_, &logprob_, &top_ids_, &top_lps_})
    backend.fill_zero(*t);
  backend.stream().synchronize();
}

void Sampler::stage(std::span<const SamplingRow> rows, std::span<const LogitAdjustment> adjustments,
                    std::span<const uint32_t> bitmasks) {
  const int64_t num_masks = int64_t(bitmasks.size()) / mask_words_;
  GS_CHECK(int64_t(bitmasks.size()) == num_masks * mask_words_ && num_masks <= limits_.max_rows,
           "sampler: {} bitmask words staged, not a multiple of {} or more than {} rows", bitmasks.size(), mask_words_,
           limits_.max_rows);
  GS_CHECK(int(rows.size()) <= limits_.max_rows, "sampler: {} rows staged, at most {}", rows.size(), limits_.max_rows);
  GS_CHECK(adjustments.size() <= size_t(limits_.max_rows) * kMaxAdjustmentsPerRow,
           "sampler: {} logit adjustments staged, at most {}", adjustments.size(),
           size_t(limits_.max_rows) * kMaxAdjustmentsPerRow);
  for (const SamplingRow& r : rows)
    GS_CHECK(r.adjust_begin >= 0 && r.adjust_begin <= r.adjust_end && r.adjust_end <= int(adjustments.size()) &&
                 r.adjust_end - r.adjust_begin <= kMaxAdjustmentsPerRow && r.penalty_slot < limits_.num_slots &&
                 r.num_logprobs <= kMaxTopLogprobs && r.bitmask_row < num_masks,
             "sampler: a staged row is inconsistent (adjustments [{}, {}) of {}, slot {}, logprobs {})", r.adjust_begin,
             r.adjust_end, adjustments.size(), r.penalty_slot, r.num_logprobs);
  staged_.assign(rows.begin(), rows.end());
  if (!rows.empty()) backend_.copy(rows_.prefix({int64_t(rows.size()) * kRowWords}), host_i32(rows));
  if (!adjustments.empty())
    backend_.copy(adjustments_.prefix({int64_t(adjustments.size()) * 2}), host_i32(adjustments));
  if (num_masks > 0) backend_.copy(bitmask_.rows(0, num_masks).reshape({-1}), host_i32(bitmasks));
}

void Sampler::reset_slot(int slot, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  GS_CHECK(slot >= 0 && slot < limits_.num_slots, "sampler: penalty slot {} outside [0, {})", slot, limits_.num_slots);
  const int64_t n = int64_t(prompt.size() + output.size());
  GS_CHECK(n <= limits_.max_tokens, "sampler: {} tokens for a penalty slot, at most {}", n, limits_.max_tokens);
  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  tokens.insert(tokens.end(), output.begin(), output.end());
  if (n > 0) backend_.copy(slot_tokens_.prefix({n}), host_i32(std::span<const int32_t>(tokens)));
  SlotArgs a;
  a.counts = counts_.data_as<int32_t>() + int64_t(slot) * limits_.vocab;
  a.prompt_mask = reinterpret_cast<uint32_t*>(prompt_mask_.data_as<int32_t>()) + int64_t(slot) * mask_words_;
  a.vocab = limits_.vocab;
  a.mask_words = mask_words_;
  a.tokens = slot_tokens_.data_as<const int32_t>();
  a.num_prompt = int(prompt.size());
  a.num_tokens = int(n);
  // No synchronisation: a host-to-device copy from pageable memory has read `tokens` when it returns (CUDA
  // stages it; the CPU copies at once), and the stream orders it before this kernel and before the next reset.
  kernels_->reset_slot(a);
}

void Sampler::sample(const Tensor& logits, int n) {
  GS_CHECK(logits.dtype() == DType::F32 && logits.ndim() == 2 && logits.dim(0) >= n && logits.dim(1) == limits_.vocab,
           "sampler: logits must be f32 [>= {}, {}], got {}", n, limits_.vocab, logits.str());
  GS_CHECK(n >= 0 && n <= limits_.max_rows, "sampler: {} rows, at most {}", n, limits_.max_rows);
  if (n == 0) return;
  SampleArgs a;
  a.logits = logits.data_as<float>();
  a.n = n;
  a.vocab = limits_.vocab;
  a.rows = reinterpret_cast<const SamplingRow*>(rows_.data_as<const int32_t>());
  a.adjustments = reinterpret_cast<const LogitAdjustment*>(adjustments_.data_as<const int32_t>());
  a.counts = counts_.data_as<int32_t>();
  a.prompt_mask = reinterpret_cast<const uint32_t*>(prompt_mask_.data_as<const int32_t>());
  a.mask_words = mask_words_;
  a.bitmask = reinterpret_cast<const uint32_t*>(bitmask_.data_as<const int32_t>());
  a.sampled = sampled_.data_as<int32_t>();
  a.logprob = logprob_.data_as<float>();
  a.top_ids = top_ids_.data_as<int32_t>();
  a.top_lps = top_lps_.data_as<float>();
  kernels_->sample(a);
}

std::vector<TokenLogprob> Sampler::fetch(int n) {
  GS_CHECK(n >= 0 && n <= int(staged_.size()), "sampler: fetch of {} rows, {} staged", n, staged_.size());
  const bool logprobs = std::any_of(staged_.begin(), staged_.begin() + n, [](auto& r) { return r.num_logprobs >= 0; });
  std::vector<int32_t> ids(n), top_ids;
  std::vector<float> lp, top_lp;
  auto host = [](auto& v, int64_t count, DType d) { return Tensor::wrap(v.data(), {count}, d, Device::cpu()); };
  if (n > 0) backend_.copy(host(ids, n, DType::I32), sampled_.prefix({n}));
  if (logprobs) {
    lp.resize(n);
    top_ids.resize(size_t(n) * kMaxTopLogprobs);
    top_lp.resize(top_ids.size());
    backend_.copy(host(lp, n, DType::F32), logprob_.prefix({n}));
    backend_.copy(host(top_ids, n * kMaxTopLogprobs, DType::I32), top_ids_.rows(0, n).reshape({-1}));
    backend_.copy(host(top_lp, n * kMaxTopLogprobs, DType::F32), top_lps_.rows(0, n).reshape({-1}));
  }
  backend_.stream().synchronize();
  fetched_bytes_ += 4 * uint64_t(n) * (logprobs ? 2 + 2 * kMaxTopLogprobs : 1);
  std::vector<TokenLogprob> out(n);
  for (int i = 0; i < n; ++i) {
    out[i].token = ids[i];
    const int k = std::min(staged_[i].num_logprobs, kMaxTopLogprobs);
    if (k < 0) continue;
    out[i].logprob = lp[i];
    for (int j = 0; j < k; ++j) {
      const size_t at = size_t(i) * kMaxTopLogprobs + size_t(j);
      if (top_ids[at] >= 0) out[i].top.emplace_back(top_ids[at], top_lp[at]);
    }
  }
  return out;
}

size_t Sampler::state_bytes() const { return counts_.nbytes() + prompt_mask_.nbytes(); }

}  // namespace gs
