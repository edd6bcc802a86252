// Checks and default ops shared by the communicators.
#include "distributed/communicator.h"

#include "core/error.h"

namespace gs {

void check_gather_columns(const Tensor& local, const Tensor& scratch, const Tensor& out, int world) {
  GS_CHECK(local.ndim() == 2 && out.ndim() == 2 && local.dim(0) == out.dim(0) && local.dtype() == out.dtype() &&
               out.dim(1) <= local.dim(1) * world && scratch.numel() >= local.numel() * world,
           "gather_columns: local {} and out {} do not match {} ranks (scratch {})", local.str(), out.str(), world,
           scratch.str());
}

void Communicator::all_reduce_add_rms_norm(Backend& backend, const Tensor& residual, const Tensor& x, const Tensor& w,
                                           float eps, const Tensor& out) {
  all_reduce(x);
  backend.add_rms_norm(residual, x, w, eps, out);
}

bool Communicator::project_add_rms_norm(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& residual,
                                        const Tensor& norm_w, float eps, const Tensor& out) {
  const std::optional<PeerSum> ps = peer_sum(out.dim(0), out.row_elems(), out.dtype());
  if (!ps) return false;
  const LinearOp op{.x = x, .w = w, .y = out, .then = AddRmsNorm{residual, norm_w, eps, out, true, ps}};
  if (!backend.folds_peer_sum(op)) return false;
  backend.linear(op);
  return true;
}

}  // namespace gs
