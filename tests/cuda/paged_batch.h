// A batch of paged-attention requests on the host for the GPU attention tests: metadata (query
// offsets, context lengths, a block table over shuffled cache blocks, slots of the new tokens) and
// bf16-exact q, k, v and cache values.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace gs::test {

struct PagedReq {
  int q_len, ctx;  // new tokens of this step, context after it
};

struct PagedBatch {
  int T = 0, nrp = 0, max_blocks = 0, num_blocks = 0;
  std::vector<int32_t> qsl, seq_lens, bt, slots;
  std::vector<float> q, k, v, kc, vc;
};

// `reqs` then pad_reqs empty requests and pad_tokens tokens of no request; the first
// `shared_blocks` block-table columns hold the same blocks in every request (a shared prefix),
// the rest each request's own.
inline PagedBatch make_paged_batch(int hq, int hkv, int D, int block_size, const std::vector<PagedReq>& reqs,
                                   int pad_reqs, int pad_tokens, int shared_blocks, uint32_t seed) {
  PagedBatch h;
  const int n = int(reqs.size());
  h.nrp = n + pad_reqs;
  int own = 0;
  for (const PagedReq& r : reqs) {
    const int need = (r.ctx + block_size - 1) / block_size;
    h.max_blocks = std::max(h.max_blocks, need);
    own += need - shared_blocks;
  }
  h.max_blocks += 1;
  h.num_blocks = shared_blocks + own + 3;
  std::vector<int32_t> perm(size_t(h.num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  h.bt.assign(size_t(h.nrp) * h.max_blocks, 0);
  h.seq_lens.assign(size_t(h.nrp), 0);
  h.qsl.assign(size_t(h.nrp) + 1, 0);
  int next = shared_blocks;
  for (int r = 0; r < n; ++r) {
    const PagedReq& q = reqs[size_t(r)];
    for (int j = 0; j < (q.ctx + block_size - 1) / block_size; ++j)
      h.bt[size_t(r) * h.max_blocks + j] = perm[size_t(j < shared_blocks ? j : next++)];
    h.seq_lens[size_t(r)] = q.ctx;
    for (int i = 0; i < q.q_len; ++i) {
      const int p = q.ctx - q.q_len + i;
      h.slots.push_back(h.bt[size_t(r) * h.max_blocks + p / block_size] * block_size + p % block_size);
    }
    h.qsl[size_t(r) + 1] = h.qsl[size_t(r)] + q.q_len;
  }
  for (int r = n; r < h.nrp; ++r) h.qsl[size_t(r) + 1] = h.qsl[size_t(r)];
  h.T = h.qsl[size_t(n)] + pad_tokens;
  h.slots.resize(size_t(h.T), -1);
  const size_t cache = size_t(h.num_blocks) * block_size * hkv * D;
  h.q = randn(size_t(h.T) * hq * D, seed + 1);
  h.k = randn(size_t(h.T) * hkv * D, seed + 2);
  h.v = randn(size_t(h.T) * hkv * D, seed + 3);
  h.kc = randn(cache, seed + 4);
  h.vc = randn(cache, seed + 5);
  return h;
}

}  // namespace gs::test
