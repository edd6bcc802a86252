// BatchDescriptor: the dispatch key of one (padded) batch, selecting at most one graph (docs/CUDA_GRAPHS.md §3).
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>

namespace gs {

struct BatchDescriptor {
  int num_tokens = 0;    // padded token count
  int num_reqs = 0;      // 0: any (the non-uniform form leaves it unspecified)
  bool uniform = false;  // a uniform decode batch: every request has uniform_query_len tokens
  bool has_lora = false;
  int uniform_query_len = 0;  // q of a uniform batch; 0 when not uniform

  // The key a general (mixed) graph of the same token count is stored under: a uniform batch
  // may replay it (vLLM's relax_for_mixed_batch_cudagraphs).
  BatchDescriptor non_uniform() const { return mixed(num_tokens, has_lora); }
  // A mixed (non-uniform) batch of `num_tokens` tokens: prefill, decode or both.
  static BatchDescriptor mixed(int num_tokens, bool has_lora = false) {
    return {.num_tokens = num_tokens, .has_lora = has_lora};
  }
  // A uniform decode batch of `num_tokens` tokens, `q` per request.
  static BatchDescriptor uniform_decode(int num_tokens, int q, bool has_lora = false) {
    return {.num_tokens = num_tokens,
            .num_reqs = q > 0 ? num_tokens / q : 0,
            .uniform = true,
            .has_lora = has_lora,
            .uniform_query_len = q};
  }

  // The request rows a batch of this key covers: a uniform batch's num_reqs; a mixed batch of T tokens up to
  // min(T, max_num_seqs) requests (its graph is captured with that many, as vLLM's dummy run).
  int request_rows(int max_num_seqs) const { return uniform ? num_reqs : std::min(num_tokens, max_num_seqs); }

  bool operator==(const BatchDescriptor&) const = default;
  std::string str() const;
};

struct BatchDescriptorHash {
  size_t operator()(const BatchDescriptor& d) const noexcept {
    size_t h = std::hash<int>{}(d.num_tokens);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::hash<int>{}(d.num_reqs));
    mix(size_t(d.uniform) | size_t(d.has_lora) << 1);
    mix(std::hash<int>{}(d.uniform_query_len));
    return h;
  }
};

}  // namespace gs
