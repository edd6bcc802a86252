// Communicator: the collectives tensor parallelism needs, between the ranks of one group.
//
// Every collective is enqueued on the stream of the backend the communicator was made for,
// like any op: it is captured into graphs and replayed with them. So every rank must issue the
// same collectives, on tensors of the same shapes, in the same order (the runner guarantees it:
// dispatch, warm-up and capture depend only on the batch, which every rank receives whole).
// Reductions sum in rank order 0..N-1 on every rank, so results are identical across ranks and
// reproducible from run to run.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/peer_sum.h"

namespace gs {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;  // "shm" (CPU), "nccl", "custom+nccl"

  // In place: t = the sum of every rank's t. F32 or BF16 (summed in f32).
  virtual void all_reduce(const Tensor& t) = 0;
  // out = every rank's `in` concatenated in rank order (out.numel() == world * in.numel()).
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // t = root's t on every rank.
  virtual void broadcast(const Tensor& t, int root) = 0;
  // Column gather: each rank's local [n, c] side by side -> out [n, W] (rank r's block at columns
  // [r c, r c + c), cut at W <= world * c). `scratch` holds world * n * c elements of local's dtype
  // (persistent, so the gather can be captured). Logits of a vocab-parallel lm_head.
  virtual void gather_columns(const Tensor& local, const Tensor& scratch, const Tensor& out) = 0;
  // Host-side: waits for this rank's stream, then for every rank to arrive.
  virtual void barrier() = 0;

  // The all-reduce of a row-parallel projection's partial sums x [n, H] fused with the residual
  // add and RMSNorm after it: x = the sum of every rank's x (as all_reduce), then
  // backend.add_rms_norm(residual, x, w, eps, out) (residual [n, H] f32 or x's dtype += x;
  // out = rms_norm(residual) * w; out may alias x). x's contents afterwards are unspecified.
  // This default runs the two ops; the CUDA communicator runs one kernel where its custom
  // one-shot all-reduce serves x's size, with the same result bit for bit.
  virtual void all_reduce_add_rms_norm(Backend& backend, const Tensor& residual, const Tensor& x, const Tensor& w,
                                       float eps, const Tensor& out);
  // Where the projection producing x [rows, hidden] of dtype dt can do that all-reduce itself
  // (AddRmsNorm::peer_sum, ops/peer_sum.h: one token, the CUDA group's peer memory): the exchange
  // it uses; else nullopt. Every rank gets the same answer for the same arguments.
  virtual std::optional<PeerSum> peer_sum(int64_t rows, int64_t hidden, DType dt) const {
    (void)rows, (void)hidden, (void)dt;
    return std::nullopt;
  }
  // The row-parallel projection x w^T (no bias) and all_reduce_add_rms_norm of its partial sums
  // into out, as one op where the projection sums the ranks' partials itself (peer_sum, and
  // Backend::folds_peer_sum); false, with nothing done, where it cannot.
  bool project_add_rms_norm(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& residual,
                            const Tensor& norm_w, float eps, const Tensor& out);
};

// Throws gs::Error unless gather_columns(local, scratch, out) fits a group of `world` ranks.
void check_gather_columns(const Tensor& local, const Tensor& scratch, const Tensor& out, int world);

// The CPU communicator: ranks (threads or processes of one host) exchange data through the
// shared-memory segment `group` (a name made by make_shm_group_name, created by rank 0).
// `backend` must be a CPU backend. A peer that does not arrive within timeout_s seconds (or
// failed) makes every collective throw gs::Error naming the collective: never a silent hang.
std::unique_ptr<Communicator> make_shm_communicator(const std::string& group, int rank, int world, Backend& backend,
                                                    double timeout_s = 600.0);
// A fresh, unique name for a shared-memory group.
std::string make_shm_group_name();

}  // namespace gs
