// The arithmetic every sampler shares, compiled for the host and the device alike, so the CPU
// reference and the CUDA kernel draw the same tokens from the same logits.
//
// The sampling rule (sampler.h states it in full) needs three primitives:
//  - a counter-based draw: the Gumbel noise of token t at output step `step` of a request with
//    seed s comes from Philox4x32-10 keyed by s at counter (t / 4, step, kStream, 0), word t % 4,
//    so it depends on nothing else (batch, graph mode, padding, preemption);
//  - an order-preserving map from floats to unsigned keys (radix selection);
//  - probability mass in 32.32 fixed point, so sums are exact and independent of their order.
#pragma once
#include <cmath>
#include <cstdint>

#include "sampling/sampling_row.h"

namespace gs::sampling {

constexpr uint32_t kStream = 0x67736d70u;  // "gsmp": separates these draws from other uses of a seed

GS_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

struct Philox4 {
  uint32_t v[4];
};

// Philox4x32-10 (Salmon et al., SC'11).
GS_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi32(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = mulhi32(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The four draws of tokens 4g .. 4g + 3 at `step` of a request seeded with (seed_lo, seed_hi).
GS_HD Philox4 draws4(uint32_t seed_lo, uint32_t seed_hi, int32_t step, int32_t group) {
  return philox4x32_10(static_cast<uint32_t>(group), static_cast<uint32_t>(step), kStream, 0u, seed_lo, seed_hi);
}

// A draw as Gumbel(0, 1) noise: -log(-log(u)) with u = (bits >> 9 + 0.5) / 2^23. 23 bits and the
// half fit a float's 24, so u is exact and below 1 and the noise finite (at 24 bits the top
// value would round u to 1: an infinite noise, a sure win for any token that drew it).
GS_HD float gumbel(uint32_t bits) {  // (the scale by 2^-23 is exact)
  const float u = (static_cast<float>(bits >> 9) + 0.5f) * 1.1920928955078125e-7f;
  return -logf(-logf(u));
}

// Unsigned keys in the order of the floats (-inf lowest, +inf highest; NaN is never asked).
GS_HD uint32_t order_key(float f) {
  uint32_t b;
#if defined(__CUDA_ARCH__)
  b = __float_as_uint(f);
#else
  __builtin_memcpy(&b, &f, 4);
#endif
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// exp(s - max) in 32.32 fixed point (s <= max): sums of these are exact in any order.
GS_HD uint64_t mass_of(float s, float max) { return static_cast<uint64_t>(expf(s - max) * 4294967296.0f); }

// How far below the row's top scaled logit m a token neither weighs nor wins: past ln 2^32 =
// 22.18 its mass_of is 0, and as Gumbel noises lie within [gumbel(0u), gumbel(~0u)], 19.4
// apart, its score stays under the top token's. The relative slack covers the rounding of s - m
// and of the scores at large |m|. A draw over the tokens above negligible_below(m) alone (the
// top token among them) is the draw over the row.
constexpr float kNegligibleBelow = 22.5f;
GS_HD float negligible_below(float m) { return m - kNegligibleBelow - fabsf(m) * 0x1p-20f; }

// Rounded products and sums that the device compiler may not fuse into an FMA, so the host and
// the device round alike.
GS_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
GS_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The scaled logit s = logit / temperature, clamped so s - max stays finite.
GS_HD float scaled(float logit, float inv_temperature) {
  const float s = mul_rn(logit, inv_temperature);
  return s > 3.0e38f ? 3.0e38f : s;
}

// Penalties of one token: repetition (HF: divides positive logits, multiplies negative ones)
// for tokens seen in the prompt or the output, then frequency and presence for output tokens.
GS_HD float apply_penalties(float x, int32_t count, bool in_prompt, const SamplingRow& r) {
  if (r.repetition_penalty != 1.0f && (in_prompt || count > 0))
    x = x > 0.0f ? x / r.repetition_penalty : x * r.repetition_penalty;
  if (count > 0) x = add_rn(x, -add_rn(mul_rn(r.frequency_penalty, static_cast<float>(count)), r.presence_penalty));
  return x;
}

// The raw logit back from a penalised and adjusted one (for the sampled token's logprob, which
// is reported before penalties as vLLM does); exact up to rounding.
GS_HD float unapply_penalties(float y, int32_t count, bool in_prompt, float adjustment, const SamplingRow& r) {
  y -= adjustment;
  if (count > 0) y = add_rn(y, add_rn(mul_rn(r.frequency_penalty, static_cast<float>(count)), r.presence_penalty));
  if (r.repetition_penalty != 1.0f && (in_prompt || count > 0))
    y = y > 0.0f ? y * r.repetition_penalty : y / r.repetition_penalty;
  return y;
}

// Whether token score (s, id) beats the best so far: the higher score, the lower id on ties.
GS_HD bool beats(float s, int32_t id, float best, int32_t best_id) { return s > best || (s == best && id < best_id); }

}  // namespace gs::sampling
