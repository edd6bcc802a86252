// CPU paged attention (fp32 reference): KV-cache write, then causal GQA attention per request
// with an online softmax (one pass over the context, no scratch memory); cascade steps run the
// shared prefix once for the whole batch and merge it into each request's own part. An e4m3 cache
// (attention/kv_cache.h) is written quantized and read dequantized to f32, row by row.
//
// Everything that changes from batch to batch (query_start_loc, seq_lens, block_table,
// slot_mapping) is read from the metadata buffers inside the kernel, so one recorded closure
// serves every batch of the same padded shape.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <vector>

#include "attention/attention_backend.h"
#include "attention/cascade.h"
#include "core/cpu_stream.h"
#include "core/error.h"

namespace gs {

namespace {

constexpr int kMaxHeadDim = 512;  // the on-stack accumulator of one query head

// Raw pointers and sizes of one launch: what the recorded closure owns.
struct Launch {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  void* kc;  // [blocks, block_size, Hkv, D]: f32, or e4m3 (f8)
  void* vc;
  const int32_t* qsl;
  const int32_t* seq_lens;
  const int32_t* block_table;
  const int32_t* slots;
  int64_t num_tokens, num_reqs, num_blocks, block_size, max_blocks;
  int64_t hq, hkv, d;
  float scale;
  int64_t window;                // <= 0: none
  float softcap;                 // <= 0: none
  int64_t cascade_prefix;        // > 0: the batch's shared prefix in tokens (attention/cascade.h)
  const float* sinks = nullptr;  // [hq] sink logits joining each softmax's denominator, or null
  bool f8 = false;               // the cache holds e4m3: x is stored as e4m3(x / scale)
  float k_scale = 1.0f, v_scale = 1.0f;

  int64_t kv_row() const { return hkv * d; }

  // Row `slot` of a cache <- src (kv_row() floats).
  void store(void* cache, int64_t slot, const float* src, float scale) const {
    if (!f8) {
      std::memcpy(static_cast<float*>(cache) + slot * kv_row(), src, size_t(kv_row()) * sizeof(float));
      return;
    }
    uint8_t* dst = static_cast<uint8_t*>(cache) + slot * kv_row();
    const float inv = 1.0f / scale;
    for (int64_t i = 0; i < kv_row(); ++i) dst[i] = f32_to_f8e4m3(src[i] * inv);
  }
  // The d floats of a cache at element offset off: in place, or dequantized into tmp.
  const float* load(const void* cache, int64_t off, float scale, float* tmp) const {
    if (!f8) return static_cast<const float*>(cache) + off;
    const uint8_t* src = static_cast<const uint8_t*>(cache) + off;
    for (int64_t i = 0; i < d; ++i) tmp[i] = f8e4m3_to_f32(src[i]) * scale;
    return tmp;
  }

  void write_cache() const {
    const int64_t actual = std::min<int64_t>(num_tokens, qsl[num_reqs]);
    const int64_t capacity = num_blocks * block_size;
    for (int64_t t = 0; t < actual; ++t) {
      const int64_t s = slots[t];
      if (s < 0) continue;
      GS_CHECK(s < capacity, "attention: slot {} of token {} is outside the cache ({} slots)", s, t, capacity);
      store(kc, s, k + t * kv_row(), k_scale);
      store(vc, s, v + t * kv_row(), v_scale);
    }
  }

  // Cache row of absolute position p of request r.
  int64_t slot_of(int64_t r, int64_t p) const {
    return int64_t(block_table[r * max_blocks + p / block_size]) * block_size + p % block_size;
  }

  void check_request(int64_t r, int64_t q_len, int64_t ctx) const {
    GS_CHECK(q_len >= 0 && qsl[r + 1] <= num_tokens && ctx >= q_len && ctx <= max_blocks * block_size,
             "attention: request {} has {} queries, {} context tokens, {} tokens in the batch (max context {})", r,
             q_len, ctx, num_tokens, max_blocks * block_size);
    // Blocks wholly before the first query's window may have been freed: not checked, not read.
    const int64_t first = window > 0 ? std::max<int64_t>(0, ctx - q_len - window + 1) : 0;
    for (int64_t b = first / block_size; b < (ctx + block_size - 1) / block_size; ++b) {
      const int32_t blk = block_table[r * max_blocks + b];
      GS_CHECK(blk >= 0 && blk < num_blocks, "attention: request {} block {} is {} (cache has {} blocks)", r, b, blk,
               num_blocks);
    }
  }

  // One query head of token t (request r's blocks) over positions [first, last]: the partial
  // softmax (running max, normaliser) and the unnormalised value sum in acc[d].
  SoftmaxPartial partial(int64_t r, int64_t t, int64_t h, int64_t first, int64_t last, float* acc) const {
    const int64_t kvh = h / (hq / hkv);
    const float* qv = q + (t * hq + h) * d;
    std::fill(acc, acc + d, 0.0f);
    float m = -INFINITY, l = 0.0f;
    float k_tmp[kMaxHeadDim], v_tmp[kMaxHeadDim];
    for (int64_t p = first; p <= last; ++p) {
      const int64_t off = slot_of(r, p) * kv_row() + kvh * d;
      const float* kv = load(kc, off, k_scale, k_tmp);
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += qv[i] * kv[i];
      s *= scale;
      if (softcap > 0) s = softcap * std::tanh(s / softcap);
      const float m_new = std::max(m, s);
      const float corr = std::exp(m - m_new), w = std::exp(s - m_new);
      const float* vv = load(vc, off, v_scale, v_tmp);
      for (int64_t i = 0; i < d; ++i) acc[i] = acc[i] * corr + w * vv[i];
      l = l * corr + w;
      m = m_new;
    }
    return {m, l};
  }

  // One query head of one token over positions [0, last], or its window's part of them.
  void attend(int64_t r, int64_t t, int64_t h, int64_t last) const {
    const int64_t first = window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
    float acc[kMaxHeadDim];
    const SoftmaxPartial part = partial(r, t, h, first, last, acc);
    float* o = out + (t * hq + h) * d;
    const float l = sinks ? part.l + std::exp(sinks[h] - part.m) : part.l;
    for (int64_t i = 0; i < d; ++i) o[i] = acc[i] / l;
  }

  void run() const {
    std::memset(out, 0, size_t(num_tokens * hq * d) * sizeof(float));  // padded rows read as zeros
    write_cache();
    if (cascade_prefix > 0 && window <= 0 && !sinks) return run_cascade();  // cascading is optional
    for (int64_t r = 0; r < num_reqs; ++r) {
      const int64_t q0 = qsl[r], q_len = qsl[r + 1] - q0, ctx = seq_lens[r];
      if (q_len <= 0) continue;
      check_request(r, q_len, ctx);
#pragma omp parallel for collapse(2) if (q_len * hq * ctx > 4096)
      for (int64_t i = 0; i < q_len; ++i)
        for (int64_t h = 0; h < hq; ++h) attend(r, q0 + i, h, ctx - q_len + i);
    }
  }

  // Cascade (attention/cascade.h): the shared prefix [0, P) once for every query of the batch,
  // through request 0's blocks (every request holds the same ones there), with no causal mask
  // (every query lies after it); then each request's own positions [P, p], causally, merged with
  // the prefix's partial by log-sum-exp.
  void run_cascade() const {
    const int64_t actual = qsl[num_reqs], P = cascade_prefix;
    for (int64_t r = 0; r < num_reqs; ++r)
      if (qsl[r + 1] > qsl[r]) {
        check_request(r, qsl[r + 1] - qsl[r], seq_lens[r]);
        GS_CHECK(seq_lens[r] - (qsl[r + 1] - qsl[r]) >= P,
                 "attention: request {} has {} computed tokens, before "
                 "the cascade prefix of {} ends",
                 r, seq_lens[r] - (qsl[r + 1] - qsl[r]), P);
      }
    std::vector<float> prefix_acc(size_t(actual * hq * d));
    std::vector<SoftmaxPartial> prefix(size_t(actual * hq));
#pragma omp parallel for collapse(2) if (actual * hq * P > 4096)
    for (int64_t t = 0; t < actual; ++t)
      for (int64_t h = 0; h < hq; ++h)
        prefix[size_t(t * hq + h)] = partial(0, t, h, 0, P - 1, &prefix_acc[size_t((t * hq + h) * d)]);
    for (int64_t r = 0; r < num_reqs; ++r) {
      const int64_t q0 = qsl[r], q_len = qsl[r + 1] - q0, ctx = seq_lens[r];
#pragma omp parallel for collapse(2) if (q_len * hq * (ctx - P) > 4096)
      for (int64_t i = 0; i < q_len; ++i)
        for (int64_t h = 0; h < hq; ++h) {
          const int64_t t = q0 + i, row = t * hq + h;
          float acc[kMaxHeadDim];
          const SoftmaxPartial own = partial(r, t, h, P, ctx - q_len + i, acc);
          merge_partials(prefix[size_t(row)], &prefix_acc[size_t(row * d)], own, acc, int(d), out + row * d);
        }
    }
  }
};

class CpuAttention final : public AttentionBackend {
 public:
  CpuAttention(Backend& backend, const AttentionShape& shape, AttentionCGSupport declared)
      : backend_(backend), shape_(shape), declared_(declared) {
    if (shape_.scale <= 0 && shape_.head_dim > 0) shape_.scale = 1.0f / std::sqrt(float(shape_.head_dim));
    GS_CHECK(shape.num_heads > 0 && shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
             "CPU attention: {} heads are not a multiple of {} kv heads", shape.num_heads, shape.num_kv_heads);
    GS_CHECK(shape.head_dim > 0 && shape.head_dim <= kMaxHeadDim, "CPU attention: head_dim {} outside [1, {}]",
             shape.head_dim, kMaxHeadDim);
  }

  std::string name() const override { return "cpu"; }
  AttentionCGSupport cudagraph_support() const override { return declared_; }
  bool supports_cascade() const override { return !shape_.sinks; }

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
               const AttentionMetadata& md, const Tensor& out, int window) override {
    forward_with_sinks(q, k, v, cache, md, out, window, Tensor());
  }

  bool supports_sinks() const override { return true; }
  void forward_with_sinks(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                          const AttentionMetadata& md, const Tensor& out, int window, const Tensor& sinks) override {
    auto* stream = dynamic_cast<CpuStream*>(&backend_.stream());
    GS_CHECK(stream, "CPU attention needs the CPU backend's stream, got a {} stream", backend_.name());
    Launch l = describe(q, k, v, cache, md, out);
    l.window = window;
    if (sinks.defined()) {
      GS_CHECK(sinks.dtype() == DType::F32 && sinks.device().is_cpu() && sinks.numel() == shape_.num_heads,
               "CPU attention: sinks {} must be host f32 [{}]", sinks.str(), shape_.num_heads);
      l.sinks = sinks.data_as<const float>();
    }
    stream->launch([l] { l.run(); });
  }

 private:
  Launch describe(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
                  const AttentionMetadata& md, const Tensor& out) const {
    const int64_t T = q.dim(0), D = shape_.head_dim, hq = shape_.num_heads, hkv = shape_.num_kv_heads;
    for (const Tensor* t : {&q, &k, &v, &out})
      GS_CHECK(t->dtype() == DType::F32 && t->device().is_cpu(), "CPU attention: {} must be host f32", t->str());
    for (const Tensor* t : {&cache.k, &cache.v})
      GS_CHECK((t->dtype() == DType::F32 || t->dtype() == DType::F8E4M3) && t->device().is_cpu() &&
                   t->dtype() == cache.k.dtype(),
               "CPU attention: cache {} must be host f32 or f8e4m3 (both planes alike)", t->str());
    GS_CHECK(cache.scales_valid(), "CPU attention: KV-cache scales {} / {} must be finite and > 0", cache.k_scale,
             cache.v_scale);
    GS_CHECK(
        q.numel() == T * hq * D && out.numel() == T * hq * D && k.numel() == T * hkv * D && v.numel() == T * hkv * D,
        "CPU attention: q {}, k {}, v {}, out {} do not match {} heads, {} kv heads of {}", q.str(), k.str(), v.str(),
        out.str(), hq, hkv, D);
    const Shape cs = cache.k.shape();
    GS_CHECK(cs.size() == 4 && cs[2] == hkv && cs[3] == D && cache.v.shape() == cs && cs[1] == md.block_size,
             "CPU attention: cache {} must be [blocks, {}, {}, {}]", cache.k.str(), md.block_size, hkv, D);
    GS_CHECK(md.num_reqs_padded >= 0 && md.query_start_loc.numel() > md.num_reqs_padded &&
                 md.seq_lens.numel() >= md.num_reqs_padded &&
                 md.block_table.numel() >= int64_t(md.num_reqs_padded) * md.max_blocks_per_req &&
                 md.slot_mapping.numel() >= T,
             "CPU attention: metadata buffers are too small for {} requests, {} tokens", md.num_reqs_padded, T);
    Launch l{q.data_as<const float>(),
             k.data_as<const float>(),
             v.data_as<const float>(),
             out.data_as<float>(),
             cache.k.data(),
             cache.v.data(),
             md.query_start_loc.data_as<const int32_t>(),
             md.seq_lens.data_as<const int32_t>(),
             md.block_table.data_as<const int32_t>(),
             md.slot_mapping.data_as<const int32_t>(),
             T,
             md.num_reqs_padded,
             cs[0],
             md.block_size,
             md.max_blocks_per_req,
             hq,
             hkv,
             D,
             shape_.scale,
             -1,
             shape_.softcap,
             md.cascade_prefix_len};
    l.f8 = cache.fp8();
    l.k_scale = cache.k_scale, l.v_scale = cache.v_scale;
    return l;
  }

  Backend& backend_;
  AttentionShape shape_;
  AttentionCGSupport declared_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cpu_attention(Backend& backend, const AttentionShape& shape,
                                                     AttentionCGSupport declared) {
  return std::make_unique<CpuAttention>(backend, shape, declared);
}

}  // namespace gs
