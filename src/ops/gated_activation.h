// The gated MLP activation, act(gate) * up, as one definition for every backend: the enum that
// names the gate's activation and its scalar math, compiled for the host (CPU backend) and the
// device (CUDA kernels) alike so both compute the same function.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define GS_HOST_DEVICE __host__ __device__
#else
#define GS_HOST_DEVICE
#endif

namespace gs {

// SwiGLU's SiLU (Llama, Qwen, Mistral, Phi-3) or GeGLU's tanh-approximated GELU (Gemma's
// gelu_pytorch_tanh); ClampedSwiglu is gpt-oss's (clamped_swiglu below), which takes a limit and
// so only the ops that carry one compute it (Backend::moe_experts).
enum class GatedActivation { Silu, GeluTanh, ClampedSwiglu };

// act(g) * u in fp32.
template <GatedActivation A>
GS_HOST_DEVICE inline float gated_act(float g, float u) {
  if constexpr (A == GatedActivation::Silu) {
    return g / (1.0f + expf(-g)) * u;
  } else {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi), as torch's gelu(approximate='tanh')
    return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
  }
}

// gpt-oss's experts (HF GptOssExperts): g clamped above at limit, u to [-limit, limit], then
// (u + 1) * g * sigmoid(1.702 g), in fp32.
constexpr float kClampedSwigluAlpha = 1.702f;
GS_HOST_DEVICE inline float clamped_swiglu(float g, float u, float limit) {
  g = g < limit ? g : limit;
  u = u < -limit ? -limit : (u < limit ? u : limit);
  return (u + 1.0f) * (g / (1.0f + expf(-kClampedSwigluAlpha * g)));
}

// An expert's gate and up outputs -> its activation (A, with clamped SwiGLU's limit), after the
// layer's gate_up bias if it has one (b: the expert's bias row at this output: gate b[0], up b[I]).
template <GatedActivation A>
GS_HOST_DEVICE inline float expert_act(float g, float u, const float* b, int64_t I, float limit) {
  g += b ? b[0] : 0.0f;
  u += b ? b[I] : 0.0f;
  if constexpr (A == GatedActivation::ClampedSwiglu)
    return clamped_swiglu(g, u, limit);
  else
    return gated_act<A>(g, u);
}

}  // namespace gs
