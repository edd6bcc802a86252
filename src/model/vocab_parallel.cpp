// Implements model/vocab_parallel.h.
#include "model/vocab_parallel.h"

#include "core/error.h"

namespace gs {

VocabParallel::VocabParallel(const TpLayout& tp, Communicator* comm, Backend& backend, int max_logit_rows)
    : tp_(tp), comm_(comm), max_rows_(max_logit_rows) {
  GS_CHECK(!tp.sharded() || (comm && comm->world_size() == tp.size && comm->rank() == tp.rank),
           "a tensor-parallel shard ({} of {}) needs its group's communicator", tp.rank, tp.size);
  if (!tp.sharded()) return;
  GS_CHECK(max_logit_rows > 0, "a tensor-parallel model needs max_logit_rows > 0");
  const int64_t R = max_logit_rows, C = tp.vocab_shard;
  local_ = Tensor::empty({R, C}, DType::F32, backend.allocator());
  scratch_ = Tensor::empty({tp.size * R * C}, DType::F32, backend.allocator());
}

void VocabParallel::embed(Backend& backend, const Tensor& ids, const Tensor& table, const Tensor& out) const {
  if (!tp_.sharded()) {
    backend.embedding(ids, table, out);
    return;
  }
  backend.embedding_shard(ids, table, tp_.vocab_begin, out);
  comm_->all_reduce(out);
}

void VocabParallel::logits(Backend& backend, const Tensor& rows, const Tensor& lm_head, const Tensor& logits) const {
  if (!tp_.sharded()) {
    backend.linear(rows, lm_head, Tensor(), logits);
    return;
  }
  const int64_t n = rows.dim(0);
  GS_CHECK(n <= max_rows_, "compute_logits of {} rows: the sharded model was built for {}", n, max_rows_);
  const Tensor local = local_.rows(0, n);
  backend.linear(rows, lm_head, Tensor(), local);
  comm_->gather_columns(local, scratch_, logits);
}

}  // namespace gs
