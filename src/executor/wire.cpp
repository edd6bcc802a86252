// Encoders and decoders of the driver <-> worker messages.
#include "executor/wire.h"

#include <nlohmann/json.hpp>
#include <unordered_set>

namespace gs {

namespace {

void put_params(WireWriter& w, const SamplingParams& p) {
  w.put(p.temperature), w.put(p.top_p), w.put(p.top_k), w.put(p.min_p);
  w.put<uint8_t>(p.seed.has_value()), w.put<uint64_t>(p.seed.value_or(0));
  w.put(p.repetition_penalty), w.put(p.presence_penalty), w.put(p.frequency_penalty);
  w.put_vec(p.logit_bias);
  w.put(p.max_tokens), w.put(p.min_tokens);
  w.put_vec(p.stop_token_ids);
  w.put<uint8_t>(p.ignore_eos), w.put(p.logprobs), w.put(p.prompt_logprobs), w.put<uint8_t>(p.skip_special_tokens);
}

SamplingParams get_params(WireReader& r) {
  SamplingParams p;
  p.temperature = r.get<float>(), p.top_p = r.get<float>(), p.top_k = r.get<int>(), p.min_p = r.get<float>();
  const bool has_seed = r.get<uint8_t>();
  const auto seed = r.get<uint64_t>();
  if (has_seed) p.seed = seed;
  p.repetition_penalty = r.get<float>(), p.presence_penalty = r.get<float>(), p.frequency_penalty = r.get<float>();
  p.logit_bias = r.get_vec<std::pair<int32_t, float>>();
  p.max_tokens = r.get<int>(), p.min_tokens = r.get<int>();
  p.stop_token_ids = r.get_vec<int>();
  p.ignore_eos = r.get<uint8_t>(), p.logprobs = r.get<int>(), p.prompt_logprobs = r.get<int>();
  p.skip_special_tokens = r.get<uint8_t>();
  return p;
}

// A TokenLogprob as token, logprob, then its top alternatives.
void put_logprob(WireWriter& w, const TokenLogprob& t) { w.put(t.token), w.put(t.logprob), w.put_vec(t.top); }
void get_logprob(WireReader& r, TokenLogprob& t) {
  t.token = r.get<int32_t>(), t.logprob = r.get<float>();
  t.top = r.get_vec<std::pair<int32_t, float>>();
}

}  // namespace

// Every kernel option travels as the driver holds it: the command line sets some of them
// (--moe-dense-max-tokens, --persistent-decode-max-tokens), and a worker builds its own backend
// and communicator from what it receives.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AttentionKernelOptions, tensor_core, tensor_core_decode,
                                                keys_as_rows_decode, keys_as_rows_early_loads, keys_as_rows_deep_stages,
                                                warp_per_pair_min_pairs, warp_per_pair_max_pairs, warps_per_pair,
                                                prefill_wgmma, prefill_tiles_per_warp_d64, decode_split_target,
                                                decode_split_min_tiles, decode_split_max_tiles, decode_warp_split,
                                                stage_query_starts, decode_four_ctas_per_sm, cascade_split_target,
                                                cascade_split_min_tiles)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LinearKernelOptions, decode_fusion, skinny_fusion, norm_fusion,
                                                norm_handoff_min_k, norm_handoff_max_k, qk_norm_fusion,
                                                qkv_wide_sm_percent)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LoraKernelOptions, fork_up_to_tokens, fuse_below_tokens, stacked_shrink)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AllReduceKernelOptions, fuse_add_rms_norm, lamport, in_projection)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MoeKernelOptions, tokens_per_pass, direct_max_tokens, dense_max_tokens,
                                                dense_min_pairs_per_expert, dense_max_work_ratio)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Fp8KernelOptions, skinny_max_tokens, gemv_max_tokens,
                                                head_norm_max_tokens, head_norm_min_k, head_norm_gemv, lt_fp8_gemm,
                                                lt_block_split_k, lt_fast_accum, lt_max_rows, lt_fused_epilogues,
                                                quantize_in_producer)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DecodeKernelOptions, persistent_max_tokens, trace_phases)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelOptions, attention, linear, lora, all_reduce, moe, fp8, decode)

std::string encode_runner_config(const RunnerConfig& c) {
  nlohmann::json j = {{"model", c.model},
                      {"load_format", c.load_format},
                      {"preset", c.preset},
                      {"device", c.device},
                      {"dtype", c.dtype},
                      {"seed", c.seed},
                      {"quantization", c.quantization},
                      {"kv_cache_dtype", c.kv_cache_dtype},
                      {"max_num_seqs", c.max_num_seqs},
                      {"max_num_batched_tokens", c.max_num_batched_tokens},
                      {"max_model_len", c.max_model_len},
                      {"block_size", c.block_size},
                      {"gpu_memory_utilization", c.gpu_memory_utilization},
                      {"kv_cache_memory_bytes", c.kv_cache_memory_bytes},
                      {"tensor_parallel_size", c.tensor_parallel_size},
                      {"enable_expert_parallel", c.enable_expert_parallel},
                      {"tp_rank", c.tp_rank},
                      {"tp_group", c.tp_group},
                      {"disable_custom_all_reduce", c.disable_custom_all_reduce},
                      {"enforce_eager", c.enforce_eager},
                      {"disable_cascade_attn", c.disable_cascade_attn},
                      {"capture_sizes", c.compilation.cudagraph_capture_sizes},
                      {"max_capture_size", c.compilation.max_cudagraph_capture_size},
                      {"compile_sizes", c.compilation.compile_sizes},
                      {"cache_dir", c.compilation.cache_dir},
                      {"disable_compile_cache", c.compilation.disable_compile_cache},
                      {"enable_lora", c.enable_lora},
                      {"lora_modules", c.lora_modules},
                      {"max_loras", c.max_loras},
                      {"max_lora_rank", c.max_lora_rank},
                      {"max_cpu_loras", c.max_cpu_loras},
                      {"kernel_options", c.kernel_options}};
  if (c.compilation.cudagraph_mode) j["cudagraph_mode"] = int(*c.compilation.cudagraph_mode);
  return j.dump();
}

RunnerConfig decode_runner_config(const std::string& s) {
  const auto j = nlohmann::json::parse(s);
  RunnerConfig c;
  c.model = j["model"], c.load_format = j["load_format"], c.preset = j["preset"], c.device = j["device"];
  c.dtype = j["dtype"], c.seed = j["seed"], c.max_num_seqs = j["max_num_seqs"];
  c.quantization = j["quantization"], c.kv_cache_dtype = j["kv_cache_dtype"];
  c.max_num_batched_tokens = j["max_num_batched_tokens"], c.max_model_len = j["max_model_len"];
  c.block_size = j["block_size"], c.gpu_memory_utilization = j["gpu_memory_utilization"];
  c.kv_cache_memory_bytes = j["kv_cache_memory_bytes"], c.tensor_parallel_size = j["tensor_parallel_size"];
  c.enable_expert_parallel = j["enable_expert_parallel"];
  c.tp_rank = j["tp_rank"], c.tp_group = j["tp_group"], c.enforce_eager = j["enforce_eager"];
  c.disable_custom_all_reduce = j["disable_custom_all_reduce"], c.disable_cascade_attn = j["disable_cascade_attn"];
  c.compilation.cudagraph_capture_sizes = j["capture_sizes"].get<std::vector<int>>();
  c.compilation.max_cudagraph_capture_size = j["max_capture_size"];
  c.compilation.compile_sizes = j["compile_sizes"].get<std::vector<int>>();
  c.compilation.cache_dir = j["cache_dir"], c.compilation.disable_compile_cache = j["disable_compile_cache"];
  if (j.contains("cudagraph_mode")) c.compilation.cudagraph_mode = CUDAGraphMode(j["cudagraph_mode"].get<int>());
  c.enable_lora = j["enable_lora"];
  c.lora_modules = j["lora_modules"].get<std::vector<std::pair<std::string, std::string>>>();
  c.max_loras = j["max_loras"], c.max_lora_rank = j["max_lora_rank"], c.max_cpu_loras = j["max_cpu_loras"];
  c.kernel_options = j["kernel_options"].get<KernelOptions>();
  return c;
}

std::string encode_limits(const WorkerLimits& l) {
  WireWriter w;
  w.put(l.num_kv_blocks), w.put(l.block_size), w.put(l.max_model_len), w.put(l.device), w.put(l.stats);
  return std::move(w.str());
}

WorkerLimits decode_limits(const std::string& s) {
  WireReader r(s);
  WorkerLimits l;
  l.num_kv_blocks = r.get<int>(), l.block_size = r.get<int>(), l.max_model_len = r.get<int>();
  l.device = r.get_str();
  l.stats = r.get<RunnerStats>();
  return l;
}

std::string encode_lora_request(const LoraRequest& r) {
  WireWriter w;
  w.put(r.id), w.put(r.name), w.put(r.path);
  return std::move(w.str());
}

LoraRequest decode_lora_request(const std::string& s) {
  WireReader r(s);
  LoraRequest q;
  q.id = r.get<int>(), q.name = r.get_str(), q.path = r.get_str();
  return q;
}

std::string encode_step_reply(const StepReply& rep) {
  WireWriter w;
  w.put(rep.stats), w.put(rep.step_seconds), w.put(rep.handle_seconds);
  w.put<uint64_t>(rep.output.sampled.size());
  for (const SampledToken& t : rep.output.sampled) w.put(t.id), put_logprob(w, t);
  w.put<uint64_t>(rep.output.prompt_logprobs.size());
  for (const PromptLogprob& p : rep.output.prompt_logprobs) w.put(p.id), w.put(p.position), put_logprob(w, p);
  return std::move(w.str());
}

StepReply decode_step_reply(const std::string& s) {
  WireReader r(s);
  StepReply rep;
  rep.stats = r.get<RunnerStats>(), rep.step_seconds = r.get<double>(), rep.handle_seconds = r.get<double>();
  rep.output.sampled.resize(r.get<uint64_t>());
  for (SampledToken& t : rep.output.sampled) t.id = r.get<RequestId>(), get_logprob(r, t);
  rep.output.prompt_logprobs.resize(r.get<uint64_t>());
  for (PromptLogprob& p : rep.output.prompt_logprobs)
    p.id = r.get<RequestId>(), p.position = r.get<int>(), get_logprob(r, p);
  return rep;
}

std::string BatchEncoder::encode(const SchedulerOutput& batch) {
  WireWriter w;
  std::unordered_set<RequestId> now;
  for (const auto& r : batch.requests) now.insert(r.id);
  std::vector<RequestId> dropped;
  for (auto it = sent_.begin(); it != sent_.end();) {
    if (now.count(it->first)) {
      ++it;
    } else {
      dropped.push_back(it->first);
      it = sent_.erase(it);
    }
  }
  w.put_vec(dropped);
  w.put<uint64_t>(batch.requests.size());
  for (const ScheduledRequest& r : batch.requests) {
    auto [it, fresh] = sent_.try_emplace(r.id, 0);
    const std::vector<int32_t>& toks = *r.all_token_ids;
    // A request that starts over (nothing computed: new, recomputed after preemption, or an id
    // a benchmark reuses) is sent whole again.
    if (!fresh && (r.num_computed_tokens == 0 || toks.size() < it->second)) fresh = true, it->second = 0;
    w.put(r.id), w.put<uint8_t>(fresh), w.put(r.num_prompt_tokens), w.put(r.num_computed_tokens);
    w.put(r.num_new_tokens), w.put<uint8_t>(r.sample), w.put(r.seed), w.put(r.num_output_tokens), w.put(r.lora_id);
    if (fresh) put_params(w, *r.params);
    w.put_vec(toks.data() + it->second, toks.size() - it->second);
    it->second = toks.size();
    w.put_vec(*r.block_ids);
  }
  return std::move(w.str());
}

const SchedulerOutput& BatchDecoder::decode(const std::string& s) {
  WireReader r(s);
  for (RequestId id : r.get_vec<RequestId>()) held_.erase(id);
  out_.requests.resize(r.get<uint64_t>());
  for (ScheduledRequest& q : out_.requests) {
    q.id = r.get<RequestId>();
    const bool fresh = r.get<uint8_t>();
    q.num_prompt_tokens = r.get<int>(), q.num_computed_tokens = r.get<int>(), q.num_new_tokens = r.get<int>();
    q.sample = r.get<uint8_t>(), q.seed = r.get<uint64_t>(), q.num_output_tokens = r.get<int>();
    q.lora_id = r.get<int>();
    if (fresh) held_[q.id] = Held{{}, {}, get_params(r)};
    auto it = held_.find(q.id);
    GS_CHECK(it != held_.end(), "tensor-parallel batch: request {} was never sent whole", q.id);
    const auto more = r.get_vec<int32_t>();
    it->second.tokens.insert(it->second.tokens.end(), more.begin(), more.end());
    it->second.blocks = r.get_vec<int32_t>();
    q.all_token_ids = &it->second.tokens;
    q.block_ids = &it->second.blocks;
    q.params = &it->second.params;
  }
  return out_;
}

}  // namespace gs
