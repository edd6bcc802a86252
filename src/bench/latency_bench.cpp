// Implements bench/latency_bench.h.
#include "bench/latency_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace gs {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct SyntheticRequest {
  std::vector<int32_t> tokens, blocks, proposals;
  int computed = 0;
};

}  // namespace

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t rank = std::clamp<size_t>(size_t(std::ceil(q * double(v.size()))), 1, v.size());
  return v[rank - 1];
}

LatencyResult run_latency_bench(ModelRunner& runner, const LatencyBenchOptions& o) {
  return run_latency_bench(BenchModel{[&runner](const SchedulerOutput& so) { return runner.execute(so); },
                                      [&runner] { return runner.stats(); }, runner.max_model_len(), runner.block_size(),
                                      runner.num_kv_blocks(), runner.model_config().vocab_size},
                           o);
}

LatencyResult run_latency_bench(const BenchModel& runner, const LatencyBenchOptions& o) {
  GS_CHECK(o.batch_size >= 1 && o.input_len >= 1 && o.output_len >= 1 && o.num_iters >= 1,
           "bench latency: batch size ({}), input len ({}), output len ({}) and iterations ({}) must be >= 1",
           o.batch_size, o.input_len, o.output_len, o.num_iters);
  const int bs = runner.block_size;
  const int shared = o.shared_prefix_len;
  GS_CHECK(shared >= 0 && shared % bs == 0,
           "bench latency: --shared-prefix-len {} must be a multiple of the block size {} (prefixes are shared in "
           "whole blocks)",
           shared, bs);
  const int k = std::max(0, o.num_speculative_tokens);
  const int prompt_len = shared + o.input_len;
  const int total_len = prompt_len + o.output_len * (1 + k);
  GS_CHECK(total_len <= runner.max_model_len,
           "bench latency: shared prefix + input + output = {} tokens exceed max_model_len {}", total_len,
           runner.max_model_len);
  const int shared_blocks = shared / bs;
  const int blocks_per_req = (total_len + bs - 1) / bs - shared_blocks;  // each request's own blocks
  const long long blocks = static_cast<long long>(blocks_per_req) * o.batch_size + shared_blocks;
  GS_CHECK(blocks <= runner.num_kv_blocks,
           "bench latency: {} sequences of {} tokens ({} shared) need {} KV blocks but the cache has {}; lower the "
           "batch size or raise the KV cache size",
           o.batch_size, total_len, shared, blocks, runner.num_kv_blocks);
  const int vocab = runner.vocab_size;
  SamplingParams params = o.sampling;
  params.max_tokens = o.output_len;

  LatencyResult res;
  std::vector<double> prefills;
  std::vector<SyntheticRequest> reqs;
  for (int it = 0; it < o.num_warmup_iters + o.num_iters; ++it) {
    const bool measured = it >= o.num_warmup_iters, rewind = o.prefill_once && it > 0;
    if (rewind) {  // back to the state the prefill left: the prompt computed, its first token sampled
      for (auto& s : reqs) s.tokens.resize(size_t(prompt_len) + 1), s.computed = prompt_len;
    } else {
      reqs.assign(size_t(o.batch_size), SyntheticRequest{});
      for (int r = 0; r < o.batch_size; ++r) {
        for (int t = 0; t < shared; ++t) reqs[r].tokens.push_back((t * 7 + 3) % vocab);
        for (int t = 0; t < o.input_len; ++t) reqs[r].tokens.push_back((r * 131 + t * 7 + 3) % vocab);
        for (int b = 0; b < shared_blocks; ++b) reqs[r].blocks.push_back(b);
        for (int b = 0; b < blocks_per_req; ++b) reqs[r].blocks.push_back(shared_blocks + r * blocks_per_req + b);
      }
    }
    // prefix_only < prompt_len: the untimed pass of request 0 over the shared prefix. That pass
    // samples at its end and drops the token: a step that samples nothing returns before the device
    // has finished it, and the prefix's work would land in the timed prefill.
    int prefix_only = prompt_len;
    auto step = [&](int budget, bool prefill_only, bool prefix_pass = false) {
      SchedulerOutput so;
      for (size_t r = 0; r < reqs.size() && budget > 0; ++r) {
        SyntheticRequest& s = reqs[r];
        if (prefill_only && s.computed >= prefix_only) continue;
        const int end = prefill_only ? std::min<int>(int(s.tokens.size()), prefix_only) : int(s.tokens.size());
        int n = std::min<int>(end - s.computed, budget);
        if (n == 0) continue;
        s.proposals.clear();
        if (!prefill_only && k > 0)  // verification: the last token and k proposals
          for (int j = 0; j < k; ++j) s.proposals.push_back((s.tokens.back() + 1 + j) % vocab);
        n += static_cast<int>(s.proposals.size());
        budget -= n;
        so.requests.push_back({.id = r,
                               .all_token_ids = &s.tokens,
                               .num_prompt_tokens = prompt_len,
                               .num_computed_tokens = s.computed,
                               .num_new_tokens = n,
                               .block_ids = &s.blocks,
                               .sample = s.computed + n >= (prefix_pass ? prefix_only : int(s.tokens.size())),
                               .params = &params,
                               .seed = r,
                               .num_output_tokens = int(s.tokens.size()) - prompt_len,
                               .lora_id = o.num_loras > 0 ? 1 + int(r) % o.num_loras : 0,
                               .spec_token_ids = &s.proposals});
      }
      const RunnerOutput out = runner.execute(so);
      for (const auto& sr : so.requests) reqs[sr.id].computed += sr.num_new_tokens;
      if (!prefix_pass)
        for (const auto& t : out.sampled) reqs[t.id].tokens.push_back(t.token);
      for (auto& s : reqs) s.computed = std::min<int>(s.computed, int(s.tokens.size()) - 1);  // rejected proposals
    };
    if (shared > 0 && !rewind) {  // request 0 computes the shared blocks; the others find them computed
      prefix_only = shared;
      for (auto& s : reqs) s.computed = &s == &reqs[0] ? 0 : shared;
      while (reqs[0].computed < shared) step(o.max_num_batched_tokens, true, true);
      prefix_only = prompt_len;
    }
    const auto t0 = Clock::now();
    auto prefilling = [&] {
      return std::any_of(reqs.begin(), reqs.end(), [&](const auto& s) { return s.computed < prompt_len; });
    };
    const bool prefill_hooks = measured && !rewind;
    if (prefill_hooks && o.on_prefill_begin) o.on_prefill_begin();
    while (prefilling()) step(o.max_num_batched_tokens, true);
    if ((measured || o.prefill_once) && !rewind) prefills.push_back(ms_since(t0));
    if (prefill_hooks && o.on_prefill_end) o.on_prefill_end();
    const uint64_t d2h0 = runner.stats().d2h_bytes;
    if (measured && o.on_decode_begin) o.on_decode_begin();
    for (int d = 1; d < o.output_len; ++d) {
      const auto t1 = Clock::now();
      step(o.batch_size * (1 + k), false);
      if (measured) res.decode_ms.push_back(ms_since(t1));
    }
    if (measured && o.on_decode_end) o.on_decode_end();
    if (o.output_len > 1) res.d2h_bytes_per_step = double(runner.stats().d2h_bytes - d2h0) / double(o.output_len - 1);
  }
  res.prefill_ms = quantile(prefills, 0.5);
  res.decode_ms_median = quantile(res.decode_ms, 0.5);
  res.decode_ms_p90 = quantile(res.decode_ms, 0.9);
  return res;
}

}  // namespace gs
