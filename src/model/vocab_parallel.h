// VocabParallel: the two vocabulary ends of a model (the embedding and the lm_head), whole or
// vocab-parallel under tensor parallelism (TpLayout): a rank embeds the ids of its vocabulary
// rows (zeros elsewhere) and the all-reduce sums the ranks'; a rank's lm_head gives its columns
// of the logits and the group gathers the whole vocabulary, so every rank samples the same tokens.
#pragma once
#include "distributed/communicator.h"
#include "model/tp_layout.h"
#include "ops/backend.h"

namespace gs {

class VocabParallel {
 public:
  VocabParallel() = default;
  // A sharded layout needs its group's `comm` and gathers up to max_logit_rows rows a step.
  VocabParallel(const TpLayout& tp, Communicator* comm, Backend& backend, int max_logit_rows);

  // out [n, H] (f32 residual) = the embedding rows of ids [n] from `table` (the rank's rows).
  void embed(Backend& backend, const Tensor& ids, const Tensor& table, const Tensor& out) const;
  // logits [n, V] f32 = rows [n, H] x lm_head^T (the rank's rows of lm_head, gathered).
  void logits(Backend& backend, const Tensor& rows, const Tensor& lm_head, const Tensor& logits) const;

 private:
  TpLayout tp_;
  Communicator* comm_ = nullptr;
  int max_rows_ = 0;
  Tensor local_, scratch_;  // sharded: f32 [rows, V / N] and the gather's [N rows, V / N]
};

}  // namespace gs
