// A model on any backend, driven from the host: one request's prompt through one forward,
// returning the logits of every position, then one token a forward (decode). Inputs are staged
// on the host and copied in with backend.copy, so the same code runs the CPU reference and the
// CUDA backend.
#pragma once
#include <memory>
#include <vector>

#include "attention/attention_backend.h"
#include "core/error.h"
#include "model/model_factory.h"

namespace gs::test {

class DeviceModel {
 public:
  static constexpr int kBlockSize = 16;

  DeviceModel(std::unique_ptr<Backend> be, const ModelSource& src, int max_tokens,
              std::unique_ptr<AttentionBackend> (*make_attention)(Backend&, const AttentionShape&))
      : be_(std::move(be)), cfg_(resolve_model_config(src)), max_tokens_(max_tokens) {
    attn_ = make_attention(*be_, attention_shape(cfg_));
    model_ = create_model(cfg_, src, *be_, *attn_, max_tokens);
    const int blocks = (max_tokens + kBlockSize - 1) / kBlockSize;
    auto dev = [&](Shape s, DType t) { return Tensor::empty(s, t, be_->allocator()); };
    std::vector<KVCacheLayer> layers;
    const Shape kv{blocks, kBlockSize, cfg_.num_kv_heads, cfg_.head_dim};
    for (int l = 0; l < cfg_.num_layers; ++l) {
      layers.push_back({dev(kv, be_->compute_dtype()), dev(kv, be_->compute_dtype())});
      be_->fill_zero(layers.back().k);
      be_->fill_zero(layers.back().v);
    }
    model_->bind_kv_cache(std::move(layers));
    ids_ = dev({max_tokens}, DType::I32), pos_ = dev({max_tokens}, DType::I32), rows_ = dev({max_tokens}, DType::I32);
    md_.query_start_loc = dev({2}, DType::I32), md_.seq_lens = dev({1}, DType::I32);
    md_.block_table = dev({1, blocks}, DType::I32), md_.slot_mapping = dev({max_tokens}, DType::I32);
    md_.block_size = kBlockSize, md_.max_blocks_per_req = blocks;
    logits_ = dev({max_tokens, cfg_.vocab_size}, DType::F32);
  }

  const ModelConfig& config() const { return cfg_; }

  // Prefills `prompt` (one request, empty cache) and returns [tokens][vocab] logits.
  std::vector<std::vector<float>> prefill(const std::vector<int32_t>& prompt) {
    GS_CHECK(!prompt.empty() && int(prompt.size()) <= max_tokens_, "prompt of {} tokens (1..{})", prompt.size(),
             max_tokens_);
    return forward(prompt, 0);
  }

  // One decode step of the same request: `token` at position `pos`, after a prefill (and steps)
  // that cached positions 0..pos-1; returns its logits.
  std::vector<float> decode(int32_t token, int pos) {
    GS_CHECK(pos >= 1 && pos < max_tokens_, "decode at position {} (1..{})", pos, max_tokens_ - 1);
    return forward({token}, pos)[0];
  }

 private:
  // One forward of the request's tokens at positions first, first + 1, ... (the cache holds
  // positions 0..first-1); returns their [tokens][vocab] logits.
  std::vector<std::vector<float>> forward(const std::vector<int32_t>& tokens, int first) {
    const int n = int(tokens.size());
    std::vector<int32_t> pos(static_cast<size_t>(n)), rows(static_cast<size_t>(n)),
        blocks(static_cast<size_t>(md_.max_blocks_per_req));
    for (int i = 0; i < n; ++i) pos[size_t(i)] = first + i, rows[size_t(i)] = i;
    for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = int32_t(b);
    put(ids_, tokens), put(pos_, pos), put(rows_, rows), put(md_.slot_mapping, pos);
    put(md_.query_start_loc, {0, n}), put(md_.seq_lens, {first + n}), put(md_.block_table, blocks);
    md_.max_query_len = n;
    md_.num_reqs = md_.num_reqs_padded = 1;
    const ForwardInputs in{
        .num_tokens = n, .input_ids = ids_.rows(0, n), .positions = pos_.rows(0, n), .attn = &md_, .lora_slots = {}};
    model_->forward(in);
    model_->compute_logits(rows_.rows(0, n), logits_.rows(0, n));
    return read_rows(n);
  }
  void put(const Tensor& dst, const std::vector<int32_t>& v) {
    staged_.push_back(v);  // must outlive the async copy
    be_->copy(dst.prefix({int64_t(v.size())}),
              Tensor::wrap(staged_.back().data(), {int64_t(v.size())}, DType::I32, Device::cpu()));
  }
  std::vector<std::vector<float>> read_rows(int n) {
    std::vector<float> host(size_t(n) * size_t(cfg_.vocab_size));
    be_->copy(Tensor::wrap(host.data(), {n, cfg_.vocab_size}, DType::F32, Device::cpu()), logits_.rows(0, n));
    be_->stream().synchronize();
    staged_.clear();
    std::vector<std::vector<float>> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      out[size_t(i)].assign(host.begin() + int64_t(i) * cfg_.vocab_size,
                            host.begin() + int64_t(i + 1) * cfg_.vocab_size);
    return out;
  }

  std::unique_ptr<Backend> be_;
  ModelConfig cfg_;
  int max_tokens_;
  std::unique_ptr<AttentionBackend> attn_;
  std::unique_ptr<PiecewiseModel> model_;
  Tensor ids_, pos_, rows_, logits_;
  AttentionMetadata md_;
  std::vector<std::vector<int32_t>> staged_;
};

}  // namespace gs::test
