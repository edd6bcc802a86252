// A Sampler over any backend's kernels, fed from host vectors, and a straightforward
// (sort-based, double precision) reference of the distribution it must draw from.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace gs::test {

inline SamplingRow sampling_row(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                                uint64_t seed = 1, int step = 0) {
  SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.min_p = min_p;
  r.seed_lo = uint32_t(seed);
  r.seed_hi = uint32_t(seed >> 32);
  r.step = step;
  return r;
}

class SamplerHarness {
 public:
  SamplerHarness(Backend& backend, std::unique_ptr<SamplingKernels> kernels, int rows, int vocab, int slots = 4)
      : be_(backend),
        sampler_(backend, std::move(kernels), SamplerLimits{rows, vocab, slots, 4096}),
        logits_(Tensor::empty({rows, vocab}, DType::F32, backend.allocator())),
        vocab_(vocab) {}

  Sampler& sampler() { return sampler_; }

  // Samples rows[i] from logits x[i] (x may hold one row for all).
  std::vector<TokenLogprob> run(const std::vector<std::vector<float>>& x, const std::vector<SamplingRow>& rows,
                                const std::vector<LogitAdjustment>& adj = {},
                                const std::vector<uint32_t>& bitmasks = {}) {
    const int n = int(rows.size());
    std::vector<float> flat;
    for (int i = 0; i < n; ++i) {
      const auto& row = x[x.size() == 1 ? 0 : size_t(i)];
      flat.insert(flat.end(), row.begin(), row.end());
    }
    be_.copy(logits_.prefix({n, vocab_}), Tensor::wrap(flat.data(), {n, vocab_}, DType::F32, Device::cpu()));
    sampler_.stage(rows, adj, bitmasks);
    sampler_.sample(logits_, n);
    return sampler_.fetch(n);
  }

  // The logits of row i after the last run (penalties and adjustments applied in place).
  std::vector<float> logits_row(int i) {
    std::vector<float> out(static_cast<size_t>(vocab_));
    be_.copy(Tensor::wrap(out.data(), {vocab_}, DType::F32, Device::cpu()), logits_.rows(i, 1).reshape({vocab_}));
    be_.stream().synchronize();
    return out;
  }

 private:
  Backend& be_;
  Sampler sampler_;
  Tensor logits_;
  int vocab_;
};

// A batch mixing rows that cannot be sampled (NaN or +inf logits, every logit -inf, a bitmask
// allowing nothing) with ordinary ones, for any vocabulary size. `want` holds the sentinel of
// each bad row and -3 for the ordinary rows (whatever they draw alone).
struct UnsampleableBatch {
  std::vector<std::vector<float>> x;
  std::vector<SamplingRow> rows;
  std::vector<uint32_t> masks;
  std::vector<int32_t> want;
};

inline UnsampleableBatch unsampleable_batch(int V) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(99);
  std::normal_distribution<float> d(0.0f, 3.0f);
  UnsampleableBatch b;
  auto add = [&](SamplingRow r, int32_t want, auto&& edit) {
    std::vector<float> row(static_cast<size_t>(V));
    for (float& v : row) v = d(rng);
    edit(row);
    r.seed_lo = 7u + uint32_t(b.rows.size());
    b.x.push_back(std::move(row));
    b.rows.push_back(r);
    b.want.push_back(want);
  };
  auto none = [](std::vector<float>&) {};
  auto fill = [](float v) { return [v](std::vector<float>& row) { std::fill(row.begin(), row.end(), v); }; };
  add(sampling_row(0.0f), -3, none);
  add(sampling_row(0.0f), kNonFiniteLogits, [](auto& row) { row[7] = kNaN; });
  add(sampling_row(1.0f, 0, 0.9f), kNonFiniteLogits, [&](auto& row) { row[size_t(V - 1)] = kInf; });
  add(sampling_row(1.0f), kNoSampleableToken, fill(-kInf));
  add(sampling_row(0.8f, 5), kNonFiniteLogits, [&](auto& row) { row[size_t(V / 2)] = kNaN; });
  add(sampling_row(1.0f, 50), -3, none);
  SamplingRow masked = sampling_row(1.0f);
  masked.bitmask_row = 0;  // allows nothing
  b.masks.assign(size_t((V + 31) / 32), 0u);
  add(masked, kNoSampleableToken, none);
  add(sampling_row(1.0f, 0, 0.5f), -3, [&](auto& row) {
    for (int t = 0; t < V; t += 2) row[size_t(t)] = -kInf;
  });
  add(sampling_row(0.0f), kNonFiniteLogits, [&](auto& row) { row[size_t(V - 1)] = kNaN; });
  add(sampling_row(0.0f), kNoSampleableToken, fill(-kInf));
  add(sampling_row(0.7f, 0, 1.0f, 0.1f), kNonFiniteLogits, fill(kNaN));
  add(sampling_row(0.9f, 0, 1.0f, 0.05f), -3, none);
  // Plain temperature (no maximum taken before the draw on the GPU): a NaN, a +inf, and scaled
  // values past the float range (the raw argmax: token 5).
  add(sampling_row(1.0f), kNonFiniteLogits, [&](auto& row) { row[size_t(V / 3)] = kNaN; });
  add(sampling_row(0.7f), kNonFiniteLogits, [&](auto& row) { row[1] = kInf; });
  add(sampling_row(2e-5f), -3, [](auto& row) { row[5] = 3e34f, row[6] = 2e34f; });
  return b;
}

// The distribution of sampling_rule.h computed the plain way: sort, cumulate, normalise.
// `margin` (out) is how close the top-p cut came to deciding otherwise (relative mass).
inline std::vector<double> reference_probs(const std::vector<float>& x, float temperature, int top_k, float top_p,
                                           float min_p, double* margin = nullptr) {
  const int V = int(x.size());
  std::vector<double> s(V);
  for (int t = 0; t < V; ++t) s[t] = double(x[t]) / temperature;
  const double m = *std::max_element(s.begin(), s.end());
  std::vector<int> kept;
  for (int t = 0; t < V; ++t)
    if (min_p <= 0.0f || s[t] >= m + std::log(double(min_p))) kept.push_back(t);
  std::sort(kept.begin(), kept.end(), [&](int a, int b) { return s[a] > s[b]; });
  if (top_k > 0 && top_k < int(kept.size())) {
    const double kth = s[kept[size_t(top_k - 1)]];
    while (s[kept.back()] < kth) kept.pop_back();
  }
  double z = 0.0;
  for (int t : kept) z += std::exp(s[t] - m);
  if (margin) *margin = 1.0;
  if (top_p < 1.0f) {  // token i stays while the tokens above it hold less than top_p of z
    double above = 0.0, closest = 1.0;
    size_t keep = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      closest = std::min(closest, std::abs(above - top_p * z) / z);
      if (above < top_p * z) keep = i + 1;
      above += std::exp(s[kept[i]] - m);
    }
    if (margin) *margin = closest;
    kept.resize(keep);
  }
  std::vector<double> p(V, 0.0);
  double total = 0.0;
  for (int t : kept) total += p[t] = std::exp(s[t] - m);
  for (double& v : p) v /= total;
  return p;
}

// Pearson's chi-square statistic of observed counts against probabilities (bins with p > 0;
// bins expecting fewer than 5 draws pooled into one), and the 1e-4 upper critical value for
// its degrees of freedom (Wilson-Hilferty).
struct ChiSquare {
  double statistic = 0.0, critical = 0.0;
  int df = 0;
};
inline ChiSquare chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  ChiSquare c;
  double pooled_e = 0.0, pooled_o = 0.0;
  auto add = [&c](double o, double e) {
    c.statistic += (o - e) * (o - e) / e;
    ++c.df;
  };
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] <= 0.0) continue;
    if (n * p[t] < 5.0)
      pooled_e += n * p[t], pooled_o += counts[t];
    else
      add(counts[t], n * p[t]);
  }
  if (pooled_e > 0.0) add(pooled_o, pooled_e);
  c.df -= 1;
  const double k = std::max(1, c.df), z = 3.719;  // upper 1e-4 quantile of N(0, 1)
  c.critical = k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3.0);
  return c;
}

}  // namespace gs::test
