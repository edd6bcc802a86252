// CPU multi-head latent attention (fp32 reference; attention/mla_attention.h): the latent row of
// every token (kv_a_layernorm of c_kv, rotated k_pe) into the cache, then per request the
// absorbed decode form (one query) or the expanded prefill form (more queries). An e4m3 cache
// (--kv-cache-dtype fp8) stores each latent value through e4m3 at the layer's scale.
//
// Everything that changes from batch to batch is read from the metadata buffers inside the
// recorded closure, as the CPU attention does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/mla_attention.h"
#include "core/cpu_stream.h"
#include "core/dtype.h"
#include "core/error.h"

namespace gs {

namespace {

struct MlaLaunch {
  const float* q;
  const float* kv_a;
  const float* kv_a_norm;
  const float* kv_b;
  const int32_t* positions;
  float* out;
  float* cache;     // [blocks, block_size, latent]; null where cache8 holds it
  uint8_t* cache8;  // e4m3 (--kv-cache-dtype fp8): x stored as e4m3(x * (1 / scale)), read as e4m3 * scale
  float scale;
  const float* inv_freq;
  const int32_t* qsl;
  const int32_t* seq_lens;
  const int32_t* block_table;
  const int32_t* slots;
  int64_t num_tokens, num_reqs, num_blocks, block_size, max_blocks;
  MlaShape s;

  int64_t H() const { return s.num_heads; }
  int64_t L() const { return s.kv_lora_rank; }
  int64_t R() const { return s.qk_rope_head_dim; }
  int64_t dn() const { return s.qk_nope_head_dim; }
  int64_t dv() const { return s.v_head_dim; }
  int64_t latent() const { return L() + R(); }
  int64_t qk() const { return dn() + R(); }
  // Row j of head h's W_UK (j < nope) or W_UV (nope <= j < nope + v) in kv_b_proj.
  const float* kv_b_row(int64_t h, int64_t j) const { return kv_b + (h * (dn() + dv()) + j) * L(); }

  // x[R] rotated in place to position pos, scaled by rope_scale.
  void rotate(float* x, int64_t pos) const {
    const int64_t half = R() / 2;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(pos) * inv_freq[i];
      const float c = std::cos(angle) * s.rope_scale, sn = std::sin(angle) * s.rope_scale;
      const int64_t a = s.rope_interleave ? 2 * i : i, b = s.rope_interleave ? 2 * i + 1 : i + half;
      const float x0 = x[a], x1 = x[b];
      x[a] = x0 * c - x1 * sn;
      x[b] = x1 * c + x0 * sn;
    }
  }

  int64_t slot_of(int64_t r, int64_t p) const {
    return int64_t(block_table[r * max_blocks + p / block_size]) * block_size + p % block_size;
  }
  // Request r's latent rows of positions [0, ctx), in f32 (an e4m3 cache's dequantized).
  std::vector<float> context(int64_t r, int64_t ctx) const {
    std::vector<float> rows(static_cast<size_t>(ctx * latent()));
    for (int64_t p = 0; p < ctx; ++p) {
      float* dst = rows.data() + p * latent();
      const int64_t at = slot_of(r, p) * latent();
      if (cache8)
        for (int64_t i = 0; i < latent(); ++i) dst[i] = f8e4m3_to_f32(cache8[at + i]) * scale;
      else
        std::copy_n(cache + at, latent(), dst);
    }
    return rows;
  }

  void write_cache(int64_t actual) const {
    const int64_t capacity = num_blocks * block_size;
    std::vector<float> lat(static_cast<size_t>(latent()));
    for (int64_t t = 0; t < actual; ++t) {
      const int64_t slot = slots[t];
      if (slot < 0) continue;
      GS_CHECK(slot < capacity, "MLA attention: slot {} of token {} is outside the cache ({} slots)", slot, t,
               capacity);
      const float* x = kv_a + t * latent();
      float ss = 0.0f;
      for (int64_t i = 0; i < L(); ++i) ss += x[i] * x[i];
      const float inv = 1.0f / std::sqrt(ss / float(L()) + s.kv_norm_eps);
      for (int64_t i = 0; i < L(); ++i) lat[size_t(i)] = kv_a_norm[i] * (x[i] * inv);
      std::copy(x + L(), x + latent(), lat.begin() + L());
      rotate(lat.data() + L(), positions[t]);
      if (cache8) {
        const float q_inv = 1.0f / scale;
        for (int64_t i = 0; i < latent(); ++i) cache8[slot * latent() + i] = f32_to_f8e4m3(lat[size_t(i)] * q_inv);
      } else {
        std::memcpy(cache + slot * latent(), lat.data(), lat.size() * sizeof(float));
      }
    }
  }

  void check_request(int64_t r, int64_t q_len, int64_t ctx) const {
    GS_CHECK(q_len >= 0 && qsl[r + 1] <= num_tokens && ctx >= q_len && ctx <= max_blocks * block_size,
             "MLA attention: request {} has {} queries, {} context tokens, {} tokens in the batch (max context {})", r,
             q_len, ctx, num_tokens, max_blocks * block_size);
    for (int64_t b = 0; b < (ctx + block_size - 1) / block_size; ++b) {
      const int32_t blk = block_table[r * max_blocks + b];
      GS_CHECK(blk >= 0 && blk < num_blocks, "MLA attention: request {} block {} is {} (cache has {} blocks)", r, b,
               blk, num_blocks);
    }
  }

  // Token t's q_pe of head h, rotated, into qpe[R].
  void q_pe(int64_t t, int64_t h, float* qpe) const {
    std::copy_n(q + (t * H() + h) * qk() + dn(), R(), qpe);
    rotate(qpe, positions[t]);
  }

  // Decode: head h of token t over positions [0, ctx) (their latent rows) in the latent space.
  void decode_head(int64_t t, int64_t h, int64_t ctx, const float* rows) const {
    std::vector<float> q_lat(static_cast<size_t>(L()), 0.0f), acc(static_cast<size_t>(L()), 0.0f),
        qpe(static_cast<size_t>(R()));
    const float* qn = q + (t * H() + h) * qk();
    for (int64_t j = 0; j < dn(); ++j) {
      const float* w = kv_b_row(h, j);
      for (int64_t i = 0; i < L(); ++i) q_lat[size_t(i)] += qn[j] * w[i];
    }
    q_pe(t, h, qpe.data());
    float m = -INFINITY, l = 0.0f;
    for (int64_t p = 0; p < ctx; ++p) {
      const float* c = rows + p * latent();
      float sc = 0.0f;
      for (int64_t i = 0; i < L(); ++i) sc += q_lat[size_t(i)] * c[i];
      for (int64_t i = 0; i < R(); ++i) sc += qpe[size_t(i)] * c[L() + i];
      sc *= s.scale;
      const float m_new = std::max(m, sc), corr = std::exp(m - m_new), w = std::exp(sc - m_new);
      for (int64_t i = 0; i < L(); ++i) acc[size_t(i)] = acc[size_t(i)] * corr + w * c[i];
      l = l * corr + w;
      m = m_new;
    }
    float* o = out + (t * H() + h) * dv();
    for (int64_t j = 0; j < dv(); ++j) {
      const float* w = kv_b_row(h, dn() + j);
      float v = 0.0f;
      for (int64_t i = 0; i < L(); ++i) v += w[i] * acc[size_t(i)];
      o[j] = v / l;
    }
  }

  // Prefill: the request's context up-projected into k_nope [ctx, H, nope] and v [ctx, H, v],
  // then causal attention of its queries (the last q_len positions).
  void prefill(int64_t q0, int64_t q_len, int64_t ctx, const float* rows) const {
    std::vector<float> kn(static_cast<size_t>(ctx * H() * dn())), vv(static_cast<size_t>(ctx * H() * dv()));
#pragma omp parallel for if (ctx * H() > 256)
    for (int64_t p = 0; p < ctx; ++p) {
      const float* c = rows + p * latent();
      for (int64_t h = 0; h < H(); ++h)
        for (int64_t j = 0; j < dn() + dv(); ++j) {
          const float* w = kv_b_row(h, j);
          float x = 0.0f;
          for (int64_t i = 0; i < L(); ++i) x += w[i] * c[i];
          if (j < dn())
            kn[size_t((p * H() + h) * dn() + j)] = x;
          else
            vv[size_t((p * H() + h) * dv() + j - dn())] = x;
        }
    }
#pragma omp parallel for collapse(2) if (q_len * H() * ctx > 4096)
    for (int64_t i = 0; i < q_len; ++i)
      for (int64_t h = 0; h < H(); ++h) {
        const int64_t t = q0 + i, last = ctx - q_len + i;
        std::vector<float> qpe(static_cast<size_t>(R())), acc(static_cast<size_t>(dv()), 0.0f);
        q_pe(t, h, qpe.data());
        const float* qn = q + (t * H() + h) * qk();
        float m = -INFINITY, l = 0.0f;
        for (int64_t p = 0; p <= last; ++p) {
          const float* k = &kn[size_t((p * H() + h) * dn())];
          const float* kpe = rows + p * latent() + L();
          float sc = 0.0f;
          for (int64_t j = 0; j < dn(); ++j) sc += qn[j] * k[j];
          for (int64_t j = 0; j < R(); ++j) sc += qpe[size_t(j)] * kpe[j];
          sc *= s.scale;
          const float m_new = std::max(m, sc), corr = std::exp(m - m_new), w = std::exp(sc - m_new);
          const float* v = &vv[size_t((p * H() + h) * dv())];
          for (int64_t j = 0; j < dv(); ++j) acc[size_t(j)] = acc[size_t(j)] * corr + w * v[j];
          l = l * corr + w;
          m = m_new;
        }
        float* o = out + (t * H() + h) * dv();
        for (int64_t j = 0; j < dv(); ++j) o[j] = acc[size_t(j)] / l;
      }
  }

  void run() const {
    std::memset(out, 0, size_t(num_tokens * H() * dv()) * sizeof(float));  // padded rows read as zeros
    write_cache(std::min<int64_t>(num_tokens, qsl[num_reqs]));
    for (int64_t r = 0; r < num_reqs; ++r) {
      const int64_t q0 = qsl[r], q_len = qsl[r + 1] - q0, ctx = seq_lens[r];
      if (q_len <= 0) continue;
      check_request(r, q_len, ctx);
      const std::vector<float> rows = context(r, ctx);
      if (q_len > 1) {
        prefill(q0, q_len, ctx, rows.data());
        continue;
      }
#pragma omp parallel for if (H() * ctx > 4096)
      for (int64_t h = 0; h < H(); ++h) decode_head(q0, h, ctx, rows.data());
    }
  }
};

class CpuMlaAttention final : public MlaAttentionBackend {
 public:
  CpuMlaAttention(Backend& backend, const MlaShape& shape)
      : MlaAttentionBackend(shape), backend_(backend), inv_freq_(rope_inv_freq(shape.rope)) {
    GS_CHECK(shape.num_heads > 0 && shape.kv_lora_rank > 0 && shape.qk_nope_head_dim > 0 && shape.v_head_dim > 0 &&
                 shape.qk_rope_head_dim > 0 && shape.qk_rope_head_dim % 2 == 0 && shape.scale > 0,
             "MLA attention: {} heads, kv_lora_rank {}, nope {}, rope {} (even), v {} must be positive",
             shape.num_heads, shape.kv_lora_rank, shape.qk_nope_head_dim, shape.qk_rope_head_dim, shape.v_head_dim);
    GS_CHECK(shape.rope.head_dim == shape.qk_rope_head_dim && shape.rope.long_from == 0,
             "MLA attention: the rope table must cover qk_rope_head_dim {} (no longrope)", shape.qk_rope_head_dim);
  }

  std::string name() const override { return "mla-cpu"; }

  void forward_mla(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md) override {
    auto* stream = dynamic_cast<CpuStream*>(&backend_.stream());
    GS_CHECK(stream, "CPU MLA attention needs the CPU backend's stream, got a {} stream", backend_.name());
    const MlaLaunch l = describe(a, cache, md);
    stream->launch([l] { l.run(); });
  }

 private:
  MlaLaunch describe(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md) const {
    const MlaShape& s = shape_;
    const int64_t T = a.q.dim(0), H = s.num_heads;
    for (const Tensor* t : {&a.q, &a.kv_a, &a.kv_a_norm, &a.kv_b, &a.out})
      GS_CHECK(t->dtype() == DType::F32 && t->device().is_cpu(), "CPU MLA attention: {} must be host f32", t->str());
    GS_CHECK((cache.k.dtype() == DType::F32 || cache.fp8()) && cache.k.device().is_cpu(),
             "CPU MLA attention: the cache {} must be host f32 or f8e4m3", cache.k.str());
    GS_CHECK(!cache.fp8() || cache.scales_valid(),
             "CPU MLA attention: the e4m3 cache's scale {} must be finite and > 0", cache.k_scale);
    GS_CHECK(a.q.numel() == T * H * s.qk_head_dim() && a.kv_a.numel() == T * s.latent_dim() &&
                 a.out.numel() == T * H * s.v_head_dim && a.kv_a_norm.numel() == s.kv_lora_rank &&
                 a.kv_b.numel() == H * int64_t(s.qk_nope_head_dim + s.v_head_dim) * s.kv_lora_rank &&
                 a.positions.dtype() == DType::I32 && a.positions.numel() >= T,
             "CPU MLA attention: q {}, kv_a {}, kv_b {}, out {}, positions {} do not match {} heads of {} / {} / {}, "
             "kv_lora_rank {}",
             a.q.str(), a.kv_a.str(), a.kv_b.str(), a.out.str(), a.positions.str(), H, s.qk_nope_head_dim,
             s.qk_rope_head_dim, s.v_head_dim, s.kv_lora_rank);
    const Shape cs = cache.k.shape();
    GS_CHECK(cs.size() == 4 && cs[1] == md.block_size && cs[2] == 1 && cs[3] == s.latent_dim(),
             "CPU MLA attention: cache {} must be [blocks, {}, 1, {}]", cache.k.str(), md.block_size, s.latent_dim());
    GS_CHECK(md.num_reqs_padded >= 0 && md.query_start_loc.numel() > md.num_reqs_padded &&
                 md.seq_lens.numel() >= md.num_reqs_padded &&
                 md.block_table.numel() >= int64_t(md.num_reqs_padded) * md.max_blocks_per_req &&
                 md.slot_mapping.numel() >= T,
             "CPU MLA attention: metadata buffers are too small for {} requests, {} tokens", md.num_reqs_padded, T);
    return MlaLaunch{a.q.data_as<const float>(),
                     a.kv_a.data_as<const float>(),
                     a.kv_a_norm.data_as<const float>(),
                     a.kv_b.data_as<const float>(),
                     a.positions.data_as<const int32_t>(),
                     a.out.data_as<float>(),
                     cache.fp8() ? nullptr : cache.k.data_as<float>(),
                     cache.fp8() ? cache.k.data_as<uint8_t>() : nullptr,
                     cache.k_scale,
                     inv_freq_.data(),
                     md.query_start_loc.data_as<const int32_t>(),
                     md.seq_lens.data_as<const int32_t>(),
                     md.block_table.data_as<const int32_t>(),
                     md.slot_mapping.data_as<const int32_t>(),
                     T,
                     md.num_reqs_padded,
                     cs[0],
                     md.block_size,
                     md.max_blocks_per_req,
                     s};
  }

  Backend& backend_;
  std::vector<float> inv_freq_;
};

}  // namespace

void MlaAttentionBackend::forward(const Tensor&, const Tensor&, const Tensor&, const KVCacheLayer&,
                                  const AttentionMetadata&, const Tensor&, int) {
  fail("MLA attention ({}) takes forward_mla (the latent projections), not per-head q, k, v", name());
}

std::unique_ptr<MlaAttentionBackend> make_mla_attention(Backend& backend, const MlaShape& shape) {
  if (!backend.device().is_cpu())
    throw Unsupported(
        fmt::format("the CPU multi-head latent attention backend needs the CPU backend, got '{}'", backend.name()));
  return std::make_unique<CpuMlaAttention>(backend, shape);
}

}  // namespace gs
