// LinearOp: one projection as the model states it (Backend::linear(const LinearOp&)): an optional
// RMSNorm of the residual stream before the GEMM, the GEMM y = x w^T (+ bias), and the op that
// consumes y. Written as data, so that a layer reads as a plain sequence of projections and the
// backend fuses what it can (a GEMV with its epilogue, the norm computed while the weight
// streams). Each part names the unfused ops it stands for; Backend's default runs exactly those.
#pragma once
#include <optional>
#include <variant>

#include "core/tensor.h"
#include "ops/gated_activation.h"
#include "ops/peer_sum.h"
#include "ops/rope.h"

namespace gs {

// Before the GEMM: rms_norm(residual, weight, eps, x). Unless keep_x, x is scratch: a backend
// that norms the row inside the GEMM may leave it unwritten; with keep_x it holds the norm after
// the op (later ops read it).
struct RmsNormInput {
  Tensor residual{}, weight{};
  float eps = 0.0f;
  bool keep_x = false;
};

// After the GEMM, the op that consumes y; y is then scratch (its contents unspecified afterwards).
// split_qkv_rope(y, positions, *rope, q_norm, k_norm, eps, q, k, v): y holds q | k | v heads.
struct SplitQkvRope {
  Tensor positions{};
  const RopeConfig* rope = nullptr;
  Tensor q_norm{}, k_norm{};  // Qwen3's per-head norms, or undefined
  float eps = 0.0f;
  Tensor q{}, k{}, v{};
};
// gated_activation(act, y, out): y holds gate | up.
struct Gated {
  GatedActivation act = GatedActivation::Silu;
  Tensor out{};
};
// add_rms_norm(residual, y, weight, eps, out). Where Backend::defers_norm(T) holds, out may be left
// unwritten; the next projection then takes the norm as its RmsNormInput of the same residual, and
// where next_reads_x (a gated or QKV projection, not a router that stores its own normed row) the
// backend may leave in out the x that projection reads (the CUDA backend's norm handoff).
// With peer_sum, y is this rank's partial sum of a row-parallel projection (tensor parallelism),
// and the add takes the sum of every rank's y: Communicator::all_reduce_add_rms_norm, done by the
// projection itself (ops/peer_sum.h) where Backend::folds_peer_sum says the backend can; out is
// then written.
struct AddRmsNorm {
  Tensor residual{}, weight{};
  float eps = 0.0f;
  Tensor out{};
  bool next_reads_x = true;
  std::optional<PeerSum> peer_sum{};
};
using LinearEpilogue = std::variant<std::monostate, SplitQkvRope, Gated, AddRmsNorm>;

struct LinearOp {
  Tensor x{};                          // [T, K]
  std::optional<RmsNormInput> norm{};  // x = rms_norm(*norm) first
  Tensor w{}, bias{};                  // [N, K], [N] or undefined
  Tensor y{};                          // [T, N]
  LinearEpilogue then{};
};

}  // namespace gs
