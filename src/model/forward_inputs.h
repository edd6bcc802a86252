// ForwardInputs: what one forward pass reads, all views of persistent buffers.
#pragma once
#include "attention/attention_metadata.h"
#include "core/tensor.h"

namespace gs {

struct ForwardInputs {
  int num_tokens = 0;  // padded token count
  Tensor input_ids;    // i32 [num_tokens]
  Tensor positions;    // i32 [num_tokens]
  const AttentionMetadata* attn = nullptr;
  // LoRA: true in batches with an adapter token (graphs keyed has_lora); then lora_slots
  // (i32 [>= num_tokens]) holds each token's adapter slot, -1 for the base model.
  bool has_lora = false;
  Tensor lora_slots;
};

}  // namespace gs
