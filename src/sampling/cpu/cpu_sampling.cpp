// The CPU sampling kernels: the reference implementation of sampling_rule.h, one row at a time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/cpu_stream.h"
#include "core/error.h"
#include "sampling/sampling_kernels.h"
#include "sampling/sampling_math.h"
#include "sampling/sampling_rule.h"

namespace gs {
namespace {

using namespace sampling;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int32_t argmax(const float* x, int V) {
  int32_t best = -1;
  for (int32_t t = 0; t < V; ++t)
    if (!std::isnan(x[t]) && (best < 0 || x[t] > x[best])) best = t;
  return best < 0 ? 0 : best;
}

float log_sum_exp(const float* x, int V) {
  float mx = kNegInf;
  for (int t = 0; t < V; ++t)
    if (!std::isnan(x[t])) mx = std::max(mx, x[t]);
  if (mx == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int t = 0; t < V; ++t)
    if (!std::isnan(x[t])) sum += std::exp(double(x[t]) - double(mx));
  return mx + float(std::log(sum));
}

void top_n_logprobs(const float* x, int V, int n, float lse, int32_t* ids, float* lps) {
  std::vector<int32_t> order;
  order.reserve(V);
  for (int32_t t = 0; t < V; ++t)
    if (!std::isnan(x[t])) order.push_back(t);
  const size_t k = std::min<size_t>(n, order.size());
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [x](int32_t a, int32_t b) { return beats(x[a], a, x[b], b); });
  for (size_t i = 0; i < k; ++i) {
    ids[i] = order[i];
    lps[i] = x[order[i]] - lse;
  }
}

// Step 3: kNonFiniteLogits or kNoSampleableToken for a row that cannot be sampled, else 0.
int32_t unsampleable(const float* x, int V) {
  bool any = false;
  for (int t = 0; t < V; ++t) {
    if (std::isnan(x[t]) || x[t] == std::numeric_limits<float>::infinity()) return kNonFiniteLogits;
    any |= x[t] > kNegInf;
  }
  return any ? 0 : kNoSampleableToken;
}

// A row's state for steps 4 and 5 of the rule.
struct Draw {
  const float* x;
  int V;
  const SamplingRow& r;
  float inv_t = 1.0f / r.temperature;
  float m = kNegInf;

  float s(int t) const { return scaled(x[t], inv_t); }
  bool valid(int t) const { return !std::isnan(x[t]); }

  // The k-th largest key among keys >= lo, or lo when there are at most k of them.
  uint32_t kth_key(uint32_t lo, int k) const {
    std::vector<uint32_t> keys;
    for (int t = 0; t < V; ++t)
      if (valid(t) && order_key(s(t)) >= lo) keys.push_back(order_key(s(t)));
    if (static_cast<int>(keys.size()) <= k) return lo;
    std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<>());
    return keys[size_t(k - 1)];
  }

  // Mass of the tokens with key >= lo and key > above (above = 0 counts every key >= lo).
  uint64_t mass(uint32_t lo, uint32_t above, bool strictly) const {
    uint64_t z = 0;
    for (int t = 0; t < V; ++t) {
      if (!valid(t)) continue;
      const uint32_t k = order_key(s(t));
      if (k >= lo && (!strictly || k > above)) z += mass_of(s(t), m);
    }
    return z;
  }

  // argmax of s + gumbel over keys >= lo; -1 when the domain is empty.
  int32_t gumbel_argmax(uint32_t lo) const {
    int32_t best = -1;
    float best_score = 0.0f;
    for (int g = 0; g * 4 < V; ++g) {
      const Philox4 d = draws4(r.seed_lo, r.seed_hi, r.step, g);
      for (int j = 0; j < 4 && g * 4 + j < V; ++j) {
        const int t = g * 4 + j;
        if (!valid(t) || order_key(s(t)) < lo) continue;
        const float score = add_rn(s(t), gumbel(d.v[j]));
        if (best < 0 || beats(score, t, best_score, best)) best = t, best_score = score;
      }
    }
    return best;
  }

  int32_t run() {
    for (int t = 0; t < V; ++t)
      if (valid(t)) m = std::max(m, s(t));
    if (m == kNegInf) return argmax(x, V);  // nothing has probability: greedy's answer
    uint32_t lo = order_key(kNegInf) + 1;   // -inf has no probability
    if (r.min_p > 0.0f) lo = std::max(lo, order_key(add_rn(m, logf(r.min_p))));
    if (r.top_k > 0 && r.top_k < V) lo = std::max(lo, kth_key(lo, r.top_k));
    const double target = r.top_p < 1.0f ? double(r.top_p) * double(mass(lo, 0, false)) : 0.0;
    uint32_t domain = lo;
    for (int round = 0; round < kMaxRounds; ++round) {
      const int32_t c = gumbel_argmax(domain);
      GS_CHECK(c >= 0, "sampling: empty candidate set (internal error)");
      if (r.top_p >= 1.0f) return c;
      const uint32_t kc = order_key(s(c));
      if (double(mass(lo, kc, true)) < target) return c;
      domain = kc + 1;
    }
    return argmax(x, V);
  }
};

void sample_row(const SampleArgs& a, int i) {
  const SamplingRow& r = a.rows[i];
  const int V = a.vocab;
  float* x = a.logits + size_t(i) * V;
  float lse = 0.0f;
  if (r.num_logprobs >= 0) {
    lse = log_sum_exp(x, V);
    if (r.num_logprobs > 0)
      top_n_logprobs(x, V, std::min(r.num_logprobs, kMaxTopLogprobs), lse, a.top_ids + i * kMaxTopLogprobs,
                     a.top_lps + i * kMaxTopLogprobs);
  }
  int32_t* counts = r.has_penalties() ? a.counts + size_t(r.penalty_slot) * V : nullptr;
  const uint32_t* prompt = r.has_penalties() ? a.prompt_mask + size_t(r.penalty_slot) * a.mask_words : nullptr;
  auto in_prompt = [prompt](int t) { return ((prompt[t >> 5] >> (t & 31)) & 1u) != 0; };
  if (counts)
    for (int t = 0; t < V; ++t) x[t] = apply_penalties(x[t], counts[t], in_prompt(t), r);
  for (int j = r.adjust_begin; j < r.adjust_end; ++j) {
    const LogitAdjustment& adj = a.adjustments[j];
    if (adj.token >= 0 && adj.token < V) x[adj.token] = add_rn(x[adj.token], adj.value);
  }
  if (r.bitmask_row >= 0) {
    const uint32_t* allowed = a.bitmask + size_t(r.bitmask_row) * a.mask_words;
    for (int t = 0; t < V; ++t)
      if (!((allowed[t >> 5] >> (t & 31)) & 1u)) x[t] = kNegInf;
  }
  if (const int32_t bad = unsampleable(x, V); bad != 0) {
    a.sampled[i] = bad;
    return;
  }
  const int32_t c = r.greedy() ? argmax(x, V) : Draw{x, V, r}.run();
  a.sampled[i] = c;
  if (r.num_logprobs >= 0 && r.target_token >= 0 && r.target_token < V) {
    a.logprob[i] = x[r.target_token] - lse;  // (rows with a target have no penalties)
  } else if (r.num_logprobs >= 0) {
    float raw = x[c];
    if (counts || r.adjust_end > r.adjust_begin) {
      float adjustment = 0.0f;
      for (int j = r.adjust_begin; j < r.adjust_end; ++j)
        if (a.adjustments[j].token == c) adjustment = a.adjustments[j].value;
      raw = unapply_penalties(raw, counts ? counts[c] : 0, counts && in_prompt(c), adjustment, r);
    }
    a.logprob[i] = raw - lse;
  }
  if (counts) ++counts[c];
}

class CpuSamplingKernels final : public SamplingKernels {
 public:
  explicit CpuSamplingKernels(CpuStream& s) : stream_(s) {}

  void sample(const SampleArgs& a) override {
    stream_.launch([a] {
      for (int i = 0; i < a.n; ++i) sample_row(a, i);
    });
  }

  void reset_slot(const SlotArgs& a) override {
    stream_.launch([a] {
      std::fill_n(a.counts, a.vocab, 0);
      std::fill_n(a.prompt_mask, a.mask_words, 0u);
      for (int j = 0; j < a.num_tokens; ++j) {
        const int32_t t = a.tokens[j];
        if (t < 0 || t >= a.vocab) continue;
        if (j < a.num_prompt)
          a.prompt_mask[t >> 5] |= 1u << (t & 31);
        else
          ++a.counts[t];
      }
    });
  }

 private:
  CpuStream& stream_;
};

}  // namespace

std::unique_ptr<SamplingKernels> make_cpu_sampling_kernels(Backend& backend) {
  auto* s = dynamic_cast<CpuStream*>(&backend.stream());
  GS_CHECK(s != nullptr, "the CPU sampling kernels need the CPU backend, got '{}'", backend.name());
  return std::make_unique<CpuSamplingKernels>(*s);
}

}  // namespace gs
