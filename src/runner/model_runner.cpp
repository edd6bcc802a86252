// ModelRunner: execute() = host batch -> persistent buffers -> dispatch -> forward -> sample.
#include "runner/model_runner.h"

#include <algorithm>

#include "attention/cascade.h"
#include "core/error.h"
#include "core/logging.h"
#include "cudagraph/forward_context.h"
#include "runner/device_setup.h"
#include "runner/model_runner_impl.h"
#include "runner/pooled_hidden.h"
#include "spec/verification.h"

namespace gs {

namespace {

Tensor host_view(std::vector<int32_t>& v, const Shape& s) {
  return Tensor::wrap(v.data(), s, DType::I32, Device::cpu());
}
// A read-only source of a copy (Tensor has no const view; copy() only reads it).
Tensor host_view(const std::vector<int32_t>& v, const Shape& s) {
  return host_view(const_cast<std::vector<int32_t>&>(v), s);
}

}  // namespace

ModelRunner::Impl::Impl(const RunnerConfig& c) : cfg(c), sampling_inputs(std::max(1, c.max_num_seqs)) {
  build_model();
  allocate_buffers();
  resolve_mode_and_keys();
  plan_kv_cache();
  build_wrappers();
  warm_up();
  tune_gemms();
  capture_all();
}

ModelRunner::Impl::~Impl() {
  spdlog::info(
      "runner: {} steps (NONE {}, PIECEWISE {}, FULL {}; cascade attention {}), {} padded tokens, {} captures after "
      "start-up",
      stats.steps_none + stats.steps_piecewise + stats.steps_full, stats.steps_none, stats.steps_piecewise,
      stats.steps_full, stats.steps_cascade, stats.padded_tokens, refused_captures());
}

void ModelRunner::Impl::stage(HostBatch& hb, int num_tokens, int sample_rows) {
  pad_host_batch(hb, num_tokens, max_reqs);
  upload(hb, num_tokens);
  stage_sampling(hb, sample_rows);
  inputs.num_tokens = num_tokens;
  inputs.input_ids = buf.input_ids.prefix({num_tokens});
  inputs.positions = buf.positions.prefix({num_tokens});
  md.num_reqs = hb.num_reqs;
}

// The padded batch -> persistent buffers: every token row of the graph's shape, every request row.
void ModelRunner::Impl::upload(const HostBatch& hb, int num_tokens) {
  backend->copy(buf.input_ids.prefix({num_tokens}), host_view(hb.input_ids, {num_tokens}));
  backend->copy(buf.positions.prefix({num_tokens}), host_view(hb.positions, {num_tokens}));
  backend->copy(buf.slot_mapping.prefix({num_tokens}), host_view(hb.slot_mapping, {num_tokens}));
  backend->copy(buf.query_start_loc, host_view(hb.query_start_loc, {max_reqs + 1}));
  backend->copy(buf.seq_lens, host_view(hb.seq_lens, {max_reqs}));
  backend->copy_leading_columns(buf.block_table.rows(0, hb.num_reqs),
                                host_view(hb.block_table, {hb.num_reqs, hb.block_table_width}));
}

// The attention backend plans the launches: a FULL graph from its key alone (the same at capture and at every
// replay), other steps from the batch, with its cascade prefix (never in a FULL graph).
void ModelRunner::Impl::plan_attention(const HostBatch& hb, CUDAGraphMode runtime, const BatchDescriptor& d,
                                       int cascade_prefix) {
  GS_CHECK(runtime != CUDAGraphMode::FULL || cascade_prefix == 0,
           "internal error: a cascade batch was dispatched to a FULL graph ({})", d.str());
  md.cascade_prefix_len = cascade_prefix;
  md.host_query_start_loc.clear();
  md.host_seq_lens.clear();
  if (runtime != CUDAGraphMode::FULL) {
    md.host_query_start_loc.assign(hb.query_start_loc.begin(), hb.query_start_loc.begin() + hb.num_reqs + 1);
    md.host_seq_lens.assign(hb.seq_lens.begin(), hb.seq_lens.begin() + hb.num_reqs);
  }
  if (runtime == CUDAGraphMode::FULL)
    attention->plan_graph(md, {.num_tokens = d.num_tokens,
                               .request_rows = d.request_rows(max_reqs),
                               .uniform_query_len = d.uniform ? d.uniform_query_len : 0});
  else
    attention->plan_eager(md, hb.max_query_len);
}

// The batch's shared prefix when cascade attention pays off for it (attention/cascade.h), else 0.
// The backend's token limit holds for the padded shape the step runs at, not only the batch.
int ModelRunner::Impl::cascade_prefix(const HostBatch& hb, const BatchDescriptor& desc) const {
  if (!cascade_enabled) return 0;
  const int p = common_prefix_len(hb.block_table, hb.block_table_width, hb.seq_lens, hb.query_start_loc, hb.num_reqs,
                                  cfg.block_size);
  const CascadeHeuristic h = attention->cascade_heuristic();
  if (!use_cascade_attention(p, hb.query_start_loc, hb.num_reqs, local_cfg.num_heads, local_cfg.num_kv_heads, h))
    return 0;
  if (h.max_tokens > 0 && dispatcher.dispatch(desc, true).second.num_tokens > h.max_tokens) return 0;
  return p;
}

// The rows a FULL graph of `d` samples: every token of a uniform batch (one per request in plain
// decode, 1 + k per request in verification); a mixed graph up to max_sample_rows.
int ModelRunner::Impl::graph_tail_rows(const BatchDescriptor& d) const {
  return d.uniform ? d.num_tokens : std::min(d.num_tokens, max_sample_rows);
}

void ModelRunner::Impl::forward(CUDAGraphMode runtime, const BatchDescriptor& desc) {
  // Once start-up has captured every key, the wrappers refuse to capture (graph_captures_after_startup
  // counts their refusals).
  ForwardContextScope scope(ForwardContext{.runtime_mode = runtime, .batch = desc, .capture_allowed = !serving});
  inputs.has_lora = desc.has_lora;
  (*full_graph)(input_addresses);
}

HostBatchLimits ModelRunner::Impl::host_limits() const {
  return {.block_size = cfg.block_size,
          .max_blocks_per_req = max_blocks_per_req,
          .max_model_len = max_model_len,
          .max_num_tokens = max_tokens,
          .max_num_reqs = max_reqs,
          .num_blocks = num_blocks};
}

int ModelRunner::Impl::refused_captures() const {
  int n = full_graph->num_refused();
  for (const auto& p : piece_graphs) n += p->num_refused();
  return n;
}

size_t ModelRunner::Impl::total_graphs() const {
  size_t n = full_graph->num_graphs();
  for (const auto& p : piece_graphs) n += p->num_graphs();
  return n;
}

// The sampled requests' rows, then inert rows (row 0's logits, greedy) up to `rows`; penalty
// slots new to a request are rebuilt from its tokens first.
void ModelRunner::Impl::stage_sampling(const HostBatch& hb, int rows) {
  tail_rows = rows;
  if (rows == 0) return;
  sampling_inputs.stage(*sampler, hb.sampled, rows, hb.sample_offsets);
  std::vector<int32_t> logits_rows = hb.logits_rows;
  logits_rows.resize(size_t(rows), 0);
  backend->copy(buf.logits_rows.prefix({rows}), host_view(logits_rows, {rows}));
}

// Logits of the tail rows, then their tokens: inside the FULL graph, eager otherwise.
void ModelRunner::Impl::run_tail() {
  if (tail_rows == 0) return;
  const Tensor logits = buf.logits.prefix({tail_rows, mcfg.vocab_size});
  model->compute_logits(buf.logits_rows.prefix({tail_rows}), logits);
  sampler->sample(logits, tail_rows);
}

// One token per sampled request; a verified request's accepted proposals and the token after
// them (spec/verification.h).
RunnerOutput ModelRunner::Impl::collect(const HostBatch& hb) {
  const int n = static_cast<int>(hb.sampled.size());
  RunnerOutput out;
  if (n == 0) return out;
  std::vector<TokenLogprob> rows = sampler->fetch(n);
  stats.d2h_bytes = sampler->fetched_bytes();
  for (int i = 0; i < n;) {
    const ScheduledRequest& r = *hb.sampled[size_t(i)];
    const int k = r.num_spec_tokens();
    std::vector<int32_t> drawn;
    for (int j = 0; j <= k; ++j) drawn.push_back(rows[size_t(i + j)].token);
    const int first = r.num_computed_tokens + 1;  // position of proposal 0
    std::vector<int32_t> proposed;
    for (int j = 0; j < k; ++j) proposed.push_back(r.token_at(first + j));
    const int emitted = 1 + num_accepted_tokens(drawn, proposed);
    for (int j = 0; j < emitted; ++j) out.sampled.push_back(SampledToken{std::move(rows[size_t(i + j)]), r.id});
    i += 1 + k;
  }
  return out;
}

RunnerOutput ModelRunner::Impl::execute(const SchedulerOutput& batch) {
  HostBatch hb = build_host_batch(batch, host_limits());
  if (hb.num_reqs == 0) return {};
  const bool has_lora = lora && LoraInputs::any_adapter(batch);  // has_lora graphs; plain batches pay nothing
  const BatchDescriptor desc = hb.uniform_decode(uniform_query_len)
                                   ? BatchDescriptor::uniform_decode(hb.num_actual_tokens, uniform_query_len, has_lora)
                                   : BatchDescriptor::mixed(hb.num_actual_tokens, has_lora);
  const int cascade = cascade_prefix(hb, desc);
  const auto [runtime, final_desc] = dispatcher.dispatch(desc, cascade > 0);
  if (final_desc.has_lora) lora->stage(batch, final_desc.num_tokens);
  // A FULL graph samples every request row of its shape; otherwise only the sampled requests.
  const int sample_rows =
      runtime == CUDAGraphMode::FULL ? graph_tail_rows(final_desc) : static_cast<int>(hb.sampled.size());
  stage(hb, final_desc.num_tokens, sample_rows);
  plan_attention(hb, runtime, final_desc, cascade);
  forward(runtime, final_desc);

  if (runtime == CUDAGraphMode::NONE) ++stats.steps_none;
  if (runtime == CUDAGraphMode::PIECEWISE) ++stats.steps_piecewise;
  if (runtime == CUDAGraphMode::FULL) ++stats.steps_full;
  if (cascade > 0) ++stats.steps_cascade;
  stats.padded_tokens += uint64_t(final_desc.num_tokens - hb.num_actual_tokens);
  RunnerOutput out = collect(hb);
  out.prompt_logprobs = prompt_logprobs(batch, hb);
  out.pooled = pool_hidden_rows(*backend, model->final_hidden(), batch, hb);
  return out;
}

ModelRunner::ModelRunner(const RunnerConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
ModelRunner::~ModelRunner() = default;
RunnerOutput ModelRunner::execute(const SchedulerOutput& batch) { return impl_->execute(batch); }
const ModelConfig& ModelRunner::model_config() const { return impl_->mcfg; }
int ModelRunner::num_kv_blocks() const { return impl_->num_blocks; }
int ModelRunner::block_size() const { return impl_->cfg.block_size; }
int ModelRunner::max_model_len() const { return impl_->max_model_len; }
std::string ModelRunner::device_name() const { return describe_device(*impl_->backend); }
RunnerStats ModelRunner::stats() const {
  RunnerStats s = impl_->stats;
  s.graph_captures_after_startup = uint64_t(impl_->refused_captures());
  return s;
}

}  // namespace gs
