// Implements engine/llm_engine.h (LLMEngine).
#include "engine/llm_engine.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/logging.h"
#include "core/splitmix64.h"
#include "engine/llm_engine_impl.h"
#include "structured/compiled_grammar.h"
#include "types/sampling_limits.h"

namespace gs {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Why a request whose row the sampler could not sample fails (the sentinels of types/sampling_limits.h).
std::string unsampleable_error(int32_t sentinel, bool structured) {
  if (sentinel == kNoSampleableToken && structured)
    return "structured output: the grammar allows no further token here (is min_tokens holding off its end?)";
  if (sentinel == kNoSampleableToken)
    return "the model produced non-finite logits (-inf for every token) for this request";
  return "the model produced non-finite logits (NaN/Inf) for this request";
}

SchedulerConfig scheduler_config(const EngineConfig& cfg, const ModelConfig& model) {
  const int window = model.all_layers_windowed() ? model.max_window() : 0;
  return {cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.enable_prefix_caching, std::max(window, 0),
          cfg.enable_lora ? cfg.max_loras : 0};
}

}  // namespace

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::None: break;
  }
  return "";
}

LLMEngine::Impl::Impl(const EngineConfig& c, std::unique_ptr<Executor> e, const Tokenizer& t,
                      std::unique_ptr<DraftProposer> d)
    : cfg(c),
      exec(std::move(e)),
      tok(t),
      pool(exec->num_kv_blocks(), exec->block_size()),
      sched(scheduler_config(c, exec->model_config()), pool),
      loras(*exec, c.lora_host_capacity(), c.enable_lora ? c.lora_modules : decltype(c.lora_modules){}),
      draft(std::move(d)) {
  max_model_len = exec->max_model_len();
  const int kv_tokens = pool.num_blocks() * pool.block_size();
  if (kv_tokens < max_model_len) {
    spdlog::warn(
        "the KV cache holds {} tokens ({} blocks of {}), less than max_model_len {}: "
        "lowering max_model_len to {} (raise --kv-cache-memory to keep it)",
        kv_tokens, pool.num_blocks(), pool.block_size(), max_model_len, kv_tokens);
    max_model_len = kv_tokens;
    max_model_len_from_kv = true;
  }
  eos_ids = exec->model_config().eos_token_ids;
  if (eos_ids.empty() && tok.eos_id()) eos_ids.push_back(*tok.eos_id());
  init_speculation();
}

std::set<int> LLMEngine::Impl::loras_in_use() const {
  std::set<int> ids;
  for (const auto& [rid, r] : requests)
    if (r->request().lora_id != 0) ids.insert(r->request().lora_id);
  return ids;
}

void LLMEngine::Impl::collect_loras() {
  if (cfg.enable_lora) loras.collect(loras_in_use());
}

RequestId LLMEngine::Impl::add(std::vector<int32_t> prompt, const SamplingParams& params, const std::string& lora_name,
                               std::shared_ptr<const LoraSlotImage> lora_image) {
  const int vocab = exec->model_config().vocab_size;
  GS_CHECK(!prompt.empty(), "the prompt is empty: give at least one token");
  for (int32_t t : prompt) GS_CHECK(t >= 0 && t < vocab, "prompt token id {} is out of range [0, {})", t, vocab);
  const int n = static_cast<int>(prompt.size());
  GS_CHECK(n < max_model_len,
           "the prompt has {} tokens, but the context is {} tokens{}: a prompt may have at most {} "
           "tokens (one more is generated)",
           n, max_model_len,
           max_model_len_from_kv ? " (limited by the KV cache; raise --kv-cache-memory)" : " (max_model_len)",
           max_model_len - 1);
  params.validate(vocab);
  if (params.grammar) {
    GS_CHECK(!uses_worker_processes(cfg),
             "structured output (response_format, structured_outputs, guided_*, tool_choice) is not supported with "
             "worker processes (--tensor-parallel-size > 1 or --distributed-executor-backend mp) yet");
    GS_CHECK(params.grammar->vocab().size() == vocab,
             "structured output: the grammar was compiled for {} tokens, the "
             "model has {}",
             params.grammar->vocab().size(), vocab);
  }
  const int lora = lora_name.empty() ? 0 : loras.acquire(lora_name, std::move(lora_image), loras_in_use());
  const RequestId id = ++request_counter;
  const uint64_t seed = params.seed ? *params.seed : splitmix64(cfg.seed ^ splitmix64(id));
  auto r = std::make_unique<EngineRequest>(id, id, std::move(prompt), params, seed, tok, eos_ids, now_seconds());
  r->request().lora_id = lora;
  sched.add(&r->request());
  requests.emplace(id, std::move(r));
  return id;
}

void LLMEngine::Impl::abort(RequestId id) {
  auto it = requests.find(id);
  if (it == requests.end()) return;
  sched.finish(&it->second->request());
  pending.push_back(it->second->aborted());
  requests.erase(it);
}

std::vector<RequestOutput> LLMEngine::Impl::step() {
  std::vector<RequestOutput> outs = std::move(pending);
  pending.clear();
  if (sched.empty()) return outs;
  propose();
  SchedulerOutput batch = sched.schedule();
  GS_CHECK(!batch.requests.empty(), "internal error: the scheduler found no work for {} requests", requests.size());
  fill_bitmasks(batch);
  const double scheduled_at = now_seconds();
  for (const auto& s : batch.requests) {
    prompt_tokens +=
        std::max(0, std::min(s.num_computed_tokens + s.num_new_tokens, s.num_prompt_tokens) - s.num_computed_tokens);
    if (auto it = requests.find(s.id); it != requests.end()) it->second->on_scheduled(scheduled_at);
  }
  RunnerOutput result;
  try {
    result = exec->execute(batch);
  } catch (const std::exception& e) {  // one request's fault must not end every other one
    run_alone(batch, e.what(), outs);
    return outs;
  }
  for (const PromptLogprob& p : result.prompt_logprobs)
    if (auto it = requests.find(p.id); it != requests.end()) it->second->on_prompt_logprob(p);
  for (const PooledRows& p : result.pooled)
    if (auto it = requests.find(p.id); it != requests.end()) it->second->on_pooled(p);
  const double now = now_seconds();
  size_t k = 0;
  for (const auto& s : batch.requests) {
    if (!s.sample) continue;
    GS_CHECK(k < result.sampled.size() && result.sampled[k].id == s.id,
             "internal error: the runner returned no token for request {}", s.id);
    size_t n = 1;
    while (k + n < result.sampled.size() && result.sampled[k + n].id == s.id) ++n;
    take_tokens(s, std::span(result.sampled).subspan(k, n), now, outs);
    k += n;
  }
  sched.on_step_executed();  // after the accepted tokens are appended: they are what blocks hash
  return outs;
}

void LLMEngine::Impl::take_token(const ScheduledRequest& s, const SampledToken& t, double now,
                                 std::vector<RequestOutput>& outs) {
  EngineRequest& er = *requests.at(s.id);
  const bool pooling = er.request().params.pooling != Pooling::None;  // an embedding, not a token
  if (!pooling && t.token < 0) {  // the sampler's sentinel: this request fails, the others go on
    const bool structured = er.request().params.grammar != nullptr;
    if (t.token == kNonFiniteLogits || !structured) ++non_finite_logits;
    RequestOutput o = er.aborted();
    o.error = unsampleable_error(t.token, structured);
    spdlog::warn("request {} failed: {}", s.id, o.error);
    sched.finish(&er.request());
    requests.erase(s.id);
    outs.push_back(std::move(o));
    return;
  }
  RequestOutput o = pooling ? er.pooled_output(now) : er.on_token(t, max_model_len, now);
  if (!pooling) ++generation_tokens;
  if (o.finished) {
    sched.finish(&er.request());
    requests.erase(s.id);
  }
  outs.push_back(std::move(o));
}

LLMEngine::LLMEngine(const EngineConfig& cfg, std::unique_ptr<Executor> executor, const Tokenizer& tok)
    : impl_(std::make_unique<Impl>(cfg, std::move(executor), tok)) {}

LLMEngine::~LLMEngine() = default;

RequestId LLMEngine::add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params) {
  return impl_->add(std::move(prompt_ids), params);
}

RequestId LLMEngine::add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                 const std::string& lora_name, std::shared_ptr<const LoraSlotImage> lora_image) {
  return impl_->add(std::move(prompt_ids), params, lora_name, std::move(lora_image));
}

std::vector<std::string> LLMEngine::lora_names() const { return impl_->loras.names(); }
std::vector<std::string> LLMEngine::held_lora_names() const { return impl_->loras.held_names(); }
std::string LLMEngine::lora_path(const std::string& name) const {
  const std::string* p = impl_->loras.path(name);
  return p ? *p : std::string();
}

std::shared_ptr<const LoraSlotImage> LLMEngine::read_lora_adapter(const std::string& name,
                                                                  const std::string& path) const {
  GS_CHECK(impl_->cfg.enable_lora, "cannot load LoRA adapter '{}': LoRA is not enabled (start with --enable-lora)",
           name);
  return impl_->exec->read_lora(name, path);
}

void LLMEngine::add_lora_adapter(const std::string& name, std::shared_ptr<const LoraSlotImage> image) {
  Impl& i = *impl_;
  GS_CHECK(i.cfg.enable_lora, "cannot load LoRA adapter '{}': LoRA is not enabled (start with --enable-lora)", name);
  GS_CHECK(!name.empty() && name != model_name(), "a LoRA adapter cannot be named '{}' (the base model's name)", name);
  i.loras.add(name, std::move(image), i.loras_in_use());
}

void LLMEngine::remove_lora_adapter(const std::string& name) { impl_->loras.remove(name, impl_->loras_in_use()); }

RequestId LLMEngine::add_request(const std::string& prompt, const SamplingParams& params) {
  GS_CHECK(!prompt.empty(), "the prompt is empty: give some text");
  return impl_->add(impl_->tok.encode(prompt, /*add_special_tokens=*/true), params);
}

void LLMEngine::abort_request(RequestId id) {
  impl_->abort(id);
  impl_->collect_loras();
}

bool LLMEngine::has_unfinished_requests() const { return !impl_->requests.empty() || !impl_->pending.empty(); }

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outs = impl_->step();
  impl_->collect_loras();  // after the step's finished requests are gone
  return outs;
}

const Tokenizer& LLMEngine::tokenizer() const { return impl_->tok; }
const ModelConfig& LLMEngine::model_config() const { return impl_->exec->model_config(); }
const EngineConfig& LLMEngine::config() const { return impl_->cfg; }
const SamplingParams& LLMEngine::default_sampling_params() const { return impl_->sampling_defaults; }
int LLMEngine::max_model_len() const { return impl_->max_model_len; }

std::string LLMEngine::model_name() const {
  const EngineConfig& c = impl_->cfg;
  if (!c.served_model_name.empty()) return c.served_model_name;
  if (c.model.empty()) return c.preset;
  std::string m = c.model;
  while (m.size() > 1 && m.back() == '/') m.pop_back();
  auto slash = m.find_last_of('/');
  return slash == std::string::npos ? m : m.substr(slash + 1);
}

EngineStats LLMEngine::stats() const {
  const Impl& i = *impl_;
  EngineStats s;
  s.num_running = i.sched.num_running();
  s.num_waiting = i.sched.num_waiting();
  s.num_preemptions = i.sched.num_preemptions();
  s.prefix_cache_query_tokens = i.sched.prefix_cache_query_tokens();
  s.prefix_cache_hit_tokens = i.sched.prefix_cache_hit_tokens();
  s.kv_blocks_total = i.pool.num_blocks();
  s.kv_blocks_free = i.pool.num_free();
  s.prompt_tokens = i.prompt_tokens;
  s.generation_tokens = i.generation_tokens;
  s.non_finite_logits = i.non_finite_logits;
  s.spec = i.spec_stats;
  if (i.draft) s.spec.draft = i.draft->stats();
  s.graphs = i.exec->stats();
  s.rank_step_seconds = i.exec->rank_step_seconds();
  s.fatal_error = i.exec->fatal_error();
  return s;
}

}  // namespace gs
