// Sampling, one row at a time (see sampler.h). Logprobs are the log-softmax of the raw model
// logits, before penalties, temperature and truncation (vLLM's default "raw_logprobs"), so
// they do not depend on how a request chose to sample.
#include "runner/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace gs {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) that depends only on the request's seed and output index.
double uniform_draw(uint64_t seed, int output_index) {
  uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(output_index));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Higher logit first; the lower id wins ties.
struct ByLogitDesc {
  const float* row;
  bool operator()(int32_t a, int32_t b) const {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  }
};

std::vector<float> log_softmax(const float* row, int n) {
  float mx = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
  float lse = mx + static_cast<float>(std::log(sum));
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = row[i] - lse;
  return out;
}

void apply_penalties(float* row, int vocab, const ScheduledRequest& r) {
  const SamplingParams& p = *r.params;
  const auto& all = *r.all_token_ids;
  const int n_prompt = r.num_prompt_tokens;
  if (p.repetition_penalty != 1.0f) {
    std::vector<uint8_t> seen(vocab, 0);
    for (int32_t t : all) {
      if (t < 0 || t >= vocab || seen[t]) continue;
      seen[t] = 1;
      row[t] = row[t] > 0.0f ? row[t] / p.repetition_penalty : row[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::vector<int> count(vocab, 0);
    for (size_t i = n_prompt; i < all.size(); ++i)
      if (all[i] >= 0 && all[i] < vocab) ++count[all[i]];
    for (int t = 0; t < vocab; ++t)
      if (count[t] > 0) row[t] -= p.frequency_penalty * count[t] + p.presence_penalty;
  }
  if (r.num_output_tokens < p.min_tokens)
    for (int t : p.stop_token_ids)
      if (t >= 0 && t < vocab) row[t] = kNegInf;
}

int32_t argmax(const float* row, int vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// Picks the index i of `weights` with cumulative weight crossing u * total.
size_t draw_index(const std::vector<double>& weights, double u) {
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double target = u * total, acc = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (acc > target && weights[i] > 0.0) return i;
  }
  for (size_t i = weights.size(); i-- > 0;)  // rounding: the last token with weight
    if (weights[i] > 0.0) return i;
  return 0;
}

// Temperature, top-k, top-p, min-p, then a seeded draw. `row` holds penalised logits.
int32_t sample_row(float* row, int vocab, const ScheduledRequest& r) {
  const SamplingParams& p = *r.params;
  const float inv_t = 1.0f / p.temperature;
  for (int i = 0; i < vocab; ++i) row[i] *= inv_t;
  const bool top_k_on = p.top_k > 0 && p.top_k < vocab;
  const bool truncate = top_k_on || p.top_p < 1.0f || p.min_p > 0.0f;

  const float mx = *std::max_element(row, row + vocab);
  const double u = uniform_draw(r.seed, r.num_output_tokens);
  if (!truncate) {  // the whole vocabulary, in id order
    std::vector<double> w(vocab);
    for (int i = 0; i < vocab; ++i) w[i] = std::exp(static_cast<double>(row[i] - mx));
    return static_cast<int32_t>(draw_index(w, u));
  }
  // Candidates in descending logit order (ties: lower id first).
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = top_k_on ? static_cast<size_t>(p.top_k) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), ByLogitDesc{row});
  ids.resize(k);
  std::vector<double> w(ids.size());
  double total = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) total += w[i] = std::exp(static_cast<double>(row[ids[i]] - mx));
  GS_CHECK(total > 0.0, "request {}: every token is masked; nothing to sample", r.id);
  if (p.top_p < 1.0f) {  // smallest prefix whose probability reaches top_p
    double acc = 0.0;
    size_t keep = 0;
    while (keep < w.size() && acc < p.top_p * total) acc += w[keep++];
    w.resize(std::max<size_t>(keep, 1));
    ids.resize(w.size());
  }
  if (p.min_p > 0.0f) {  // w[0] is the most likely token's weight
    for (double& x : w)
      if (x < p.min_p * w[0]) x = 0.0;
  }
  return ids[draw_index(w, u)];
}

void fill_logprobs(const std::vector<float>& lp, int n_top, SampledToken& out) {
  out.logprob = lp[out.token];
  if (n_top <= 0) return;
  std::vector<int32_t> ids(lp.size());
  std::iota(ids.begin(), ids.end(), 0);
  size_t k = std::min<size_t>(n_top, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), ByLogitDesc{lp.data()});
  for (size_t i = 0; i < k; ++i) out.top_logprobs.emplace_back(ids[i], lp[ids[i]]);
}

}  // namespace

std::vector<SampledToken> sample_tokens(float* logits, int vocab_size,
                                        std::span<const ScheduledRequest* const> reqs) {
  std::vector<SampledToken> out;
  out.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ScheduledRequest& r = *reqs[i];
    float* row = logits + i * static_cast<size_t>(vocab_size);
    std::vector<float> lp;
    if (r.params->logprobs >= 0) lp = log_softmax(row, vocab_size);
    apply_penalties(row, vocab_size, r);
    SampledToken s;
    s.id = r.id;
    s.token = r.params->greedy() ? argmax(row, vocab_size) : sample_row(row, vocab_size, r);
    if (!lp.empty()) fill_logprobs(lp, r.params->logprobs, s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gs
