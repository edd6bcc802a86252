// A minimal driver for model tests: paged KV cache, attention metadata for a batch of requests,
// and one forward returning the logits of every token. Blocks are handed out in a scrambled
// order so block tables are never contiguous.
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/error.h"
#include "model/deepseek_model.h"
#include "model/model_factory.h"

namespace gs::test {

class ModelHarness {
 public:
  static constexpr int kBlockSize = 4;  // small, so short prompts span several blocks

  // kv_dtype: the cache's, f32 or F8E4M3 (--kv-cache-dtype fp8, with the checkpoint's scales).
  ModelHarness(const ModelSource& src, int max_tokens = 256, int max_reqs = 4, int num_blocks = 128,
               DType kv_dtype = DType::F32)
      : be_(make_cpu_backend()),
        cfg_(resolve_model_config(src)),
        max_tokens_(max_tokens),
        max_reqs_(max_reqs),
        num_blocks_(num_blocks),
        max_blocks_(num_blocks) {
    if (cfg_.mla.enabled())
      attn_ = make_mla_attention(*be_, mla_shape(cfg_));
    else
      attn_ = make_cpu_attention(*be_, attention_shape(cfg_));
    model_ = create_model(cfg_, src, *be_, *attn_, max_tokens);
    auto i32 = [&](Shape s) { return Tensor::empty(s, DType::I32, be_->allocator()); };
    ids_ = i32({max_tokens}), pos_ = i32({max_tokens}), rows_ = i32({max_tokens});
    md_.query_start_loc = i32({max_reqs + 1}), md_.seq_lens = i32({max_reqs});
    md_.block_table = i32({max_reqs, max_blocks_}), md_.slot_mapping = i32({max_tokens});
    md_.block_size = kBlockSize, md_.max_blocks_per_req = max_blocks_;
    std::vector<KVCacheLayer> layers;
    const KVLayout kl = kv_layout(cfg_);  // MLA: latent rows in k, no v
    for (int l = 0; l < cfg_.num_layers; ++l) {
      const Shape s{num_blocks, kBlockSize, kl.num_kv_heads, kl.head_dim};
      layers.push_back({Tensor::empty(s, kv_dtype, be_->allocator()),
                        kl.planes == 2 ? Tensor::empty(s, kv_dtype, be_->allocator()) : Tensor()});
      for (const Tensor& t : {layers.back().k, layers.back().v})
        if (t.defined()) std::memset(t.data(), 0, t.nbytes());
    }
    kv_ = layers;  // views of the same storage
    model_->bind_kv_cache(std::move(layers));
    logits_ = Tensor::empty({max_tokens, cfg_.vocab_size}, DType::F32, be_->allocator());
  }

  const ModelConfig& config() const { return cfg_; }
  PiecewiseModel& model() { return *model_; }

  using Batch = std::vector<std::pair<int, std::vector<int>>>;

  // One eager forward over requests (id -> new tokens), in order. Returns [tokens][vocab] logits.
  std::vector<std::vector<float>> step(const Batch& batch) {
    const ForwardInputs in = prepare(batch);
    run(in);
    return read_logits(in.num_tokens);
  }

  // Writes the batch into the persistent input buffers (advancing each request's context).
  ForwardInputs prepare(const Batch& batch) {
    int t = 0;
    int* qsl = md_.query_start_loc.data_as<int>();
    for (size_t r = 0; r < batch.size(); ++r) {
      auto& req = reqs_[batch[r].first];
      qsl[r] = t;
      for (int tok : batch[r].second) {
        const int p = req.len++;
        if (p % kBlockSize == 0) req.blocks.push_back(next_block());
        ids_.data_as<int>()[t] = tok;
        pos_.data_as<int>()[t] = p;
        md_.slot_mapping.data_as<int>()[t] = req.blocks[size_t(p / kBlockSize)] * kBlockSize + p % kBlockSize;
        rows_.data_as<int>()[t] = t;
        ++t;
      }
      md_.seq_lens.data_as<int>()[r] = req.len;
      for (size_t b = 0; b < req.blocks.size(); ++b)
        md_.block_table.data_as<int>()[r * max_blocks_ + b] = req.blocks[b];
    }
    qsl[batch.size()] = t;
    md_.num_reqs = md_.num_reqs_padded = int(batch.size());
    return ForwardInputs{t, ids_.rows(0, t), pos_.rows(0, t), &md_, false, Tensor()};
  }

  // Enqueues the forward and the logits of every token (eager, or recorded while capturing).
  void run(const ForwardInputs& in) {
    model_->forward(in);
    model_->compute_logits(rows_.rows(0, in.num_tokens), logits_.rows(0, in.num_tokens));
  }

  std::vector<std::vector<float>> read_logits(int n) {
    be_->stream().synchronize();
    std::vector<std::vector<float>> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const float* row = logits_.data_as<float>() + int64_t(i) * cfg_.vocab_size;
      out[size_t(i)].assign(row, row + cfg_.vocab_size);
    }
    return out;
  }

  Backend& backend() { return *be_; }
  // The cache of `layer` (after the stream drained).
  const KVCacheLayer& kv(int layer) {
    be_->stream().synchronize();
    return kv_[size_t(layer)];
  }
  // Whether any K or V entry of `layer` was written (the cache starts zeroed).
  bool kv_written(int layer) {
    be_->stream().synchronize();
    const KVCacheLayer& l = kv_[size_t(layer)];
    for (const Tensor& t : {l.k, l.v})
      if (t.defined() &&
          std::any_of(t.data_as<float>(), t.data_as<float>() + t.numel(), [](float x) { return x != 0.0f; }))
        return true;
    return false;
  }

 private:
  struct Request {
    int len = 0;
    std::vector<int> blocks;
  };
  int next_block() {
    GS_CHECK(next_ < num_blocks_ && num_blocks_ % 37 != 0, "test KV cache of {} blocks is exhausted", num_blocks_);
    return (next_++ * 37 + 11) % num_blocks_;  // a permutation while 37 does not divide num_blocks
  }

  std::unique_ptr<Backend> be_;
  ModelConfig cfg_;
  std::unique_ptr<AttentionBackend> attn_;
  std::unique_ptr<PiecewiseModel> model_;
  int max_tokens_, max_reqs_, num_blocks_, max_blocks_;
  Tensor ids_, pos_, rows_, logits_;
  AttentionMetadata md_;
  std::map<int, Request> reqs_;
  int next_ = 0;
  std::vector<KVCacheLayer> kv_;  // views of the bound cache (after be_: freed before the allocator)
};

}  // namespace gs::test
