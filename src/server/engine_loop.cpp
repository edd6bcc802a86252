// Implements server/engine_loop.h (EngineLoop).
#include "server/engine_loop.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "model/model_config.h"
#include "runner/pooling_config.h"
#include "server/api_error.h"
#include "server/lora_policy.h"

namespace gs {

EngineLoop::EngineLoop(std::unique_ptr<LLMEngine> engine, std::string chat_template,
                       const std::vector<std::string>& names)
    : engine_(std::move(engine)), tokenizer_(engine_->tokenizer()) {
  model_.name = engine_->model_name();
  for (const std::string& n : names)
    if (n != model_.name) model_.aliases.push_back(n);
  model_.max_model_len = engine_->max_model_len();
  lora_names_ = engine_->lora_names();
  for (const std::string& n : engine_->held_lora_names()) lora_held_.insert(n);
  for (const std::string& n : lora_names_) lora_paths_[n] = engine_->lora_path(n);
  model_.vocab_size = tokenizer_.size();
  model_.sampling_defaults = engine_->default_sampling_params();
  model_.lora_enabled = engine_->config().enable_lora;
  for (int32_t id = 0; id < model_.vocab_size; ++id)
    model_.max_token_bytes = std::max(model_.max_token_bytes, int(tokenizer_.token_bytes(id).size()));
  model_.chat_template = chat_template.empty() ? tokenizer_.chat_template() : chat_template;
  model_.bos_token = tokenizer_.bos_token();
  model_.eos_token = tokenizer_.eos_token();
  stats_ = engine_->stats();
  const EngineConfig& c = engine_->config();
  model_.cache_config = {{"block_size", std::to_string(c.block_size)},
                         {"cache_dtype", c.kv_cache_dtype},
                         {"enable_prefix_caching", c.enable_prefix_caching ? "True" : "False"},
                         {"gpu_memory_utilization", fmt::format("{}", c.gpu_memory_utilization)},
                         {"num_gpu_blocks", std::to_string(stats_.kv_blocks_total)},
                         {"num_cpu_blocks", "0"},
                         {"swap_space", "0"},
                         {"cpu_offload_gb", "0"}};
  step_tokens_seen_ = stats_.prompt_tokens + stats_.generation_tokens;
  model_.hidden_size = engine_->model_config().hidden_size;
  if (c.runner == "pooling") {
    const PoolingConfig pc = load_pooling_config(c.model);
    model_.pooling = true;
    model_.pooling_type = c.pooling_type.empty() ? pc.type : parse_pooling(c.pooling_type);
    model_.matryoshka = pc.matryoshka;
    model_.matryoshka_dims = pc.matryoshka_dims;
    spdlog::info("pooling runner: {} pooling, L2-normalised embeddings of size {} on /v1/embeddings",
                 pooling_name(model_.pooling_type), model_.hidden_size);
  }
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<int32_t> EngineLoop::encode(std::string_view text, bool add_special_tokens) const {
  return tokenizer_.encode(text, add_special_tokens);
}
std::vector<int32_t> EngineLoop::encode_bounded(std::string_view text, bool add_special_tokens,
                                                size_t max_tokens) const {
  return tokenizer_.encode(text, add_special_tokens, max_tokens);
}
std::string EngineLoop::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return tokenizer_.decode(ids, skip_special_tokens);
}
std::string EngineLoop::token_text(int32_t id) const { return tokenizer_.token_bytes(id); }

// LLMEngine::compile_constraint is thread-safe and touches no step state.
std::shared_ptr<const structured::CompiledGrammar> EngineLoop::compile_constraint(
    const structured::ConstraintSpec& spec) const {
  return engine_->compile_constraint(spec);
}

RequestId EngineLoop::submit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                             std::shared_ptr<OutputQueue> sink, int choice, const std::string& lora) {
  std::shared_ptr<const LoraSlotImage> image = read_if_dropped(lora);
  std::future<RequestId> accepted;
  {
    std::lock_guard lock(mu_);
    GS_CHECK(!stop_, "the engine is shutting down");
    Pending p{std::move(prompt_ids), params, std::move(sink), choice, {}, lora, std::move(image)};
    accepted = p.accepted.get_future();
    pending_.push_back(std::move(p));
  }
  cv_.notify_all();
  return accepted.get();  // rethrows the engine's gs::Error
}

std::shared_ptr<const LoraSlotImage> EngineLoop::read_if_dropped(const std::string& lora) const {
  if (lora.empty()) return nullptr;
  std::string path;
  {
    std::lock_guard lock(mu_);
    auto it = lora_paths_.find(lora);
    if (lora_held_.contains(lora) || it == lora_paths_.end()) return nullptr;  // held, or refused by the engine
    path = it->second;
  }
  // lora_held_ may be a step old: an adapter dropped since is read by the engine itself, one
  // taken back since is read here for nothing.
  try {
    return engine_->read_lora_adapter(lora, path);
  } catch (const Error& e) {
    throw Error(
        fmt::format("LoRA adapter '{}' is not in host memory (--max-cpu-loras) and could not be read "
                    "again from {}: {}",
                    lora, path, e.what()));
  }
}

void EngineLoop::abort(RequestId id) {
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

int EngineLoop::num_waiting() const {
  std::lock_guard lock(mu_);
  return stats_.num_waiting + static_cast<int>(pending_.size());
}

EngineStats EngineLoop::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Histogram EngineLoop::iteration_tokens() const {
  std::lock_guard lock(mu_);
  return iteration_tokens_;
}

std::vector<std::string> EngineLoop::lora_names() const {
  std::lock_guard lock(mu_);
  return lora_names_;
}

void EngineLoop::run_on_engine(std::function<void()> f) {
  std::packaged_task<void()> task(std::move(f));
  std::future<void> done = task.get_future();
  {
    std::lock_guard lock(mu_);
    GS_CHECK(!stop_, "the engine is shutting down");
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
  done.get();
}

void EngineLoop::load_lora(const std::string& name, const std::string& path) {
  {
    std::lock_guard lock(mu_);
    const auto& al = model_.aliases;
    if (name == model_.name || std::find(al.begin(), al.end(), name) != al.end())
      throw ApiError(400, fmt::format("'{}' is the base model's name: give the adapter another lora_name", name),
                     "lora_name");
    if (std::find(lora_names_.begin(), lora_names_.end(), name) != lora_names_.end() || lora_loading_.contains(name))
      throw ApiError(400, fmt::format("The lora adapter '{}' has already been loaded.", name), "lora_name");
    lora_loading_.insert(name);
  }
  struct Unreserve {
    EngineLoop& loop;
    const std::string& name;
    ~Unreserve() {
      std::lock_guard lock(loop.mu_);
      loop.lora_loading_.erase(name);
    }
  } unreserve{*this, name};
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const LoraSlotImage> image;
  try {
    image = engine_->read_lora_adapter(name, path);  // the slow part, on this thread
    run_on_engine([&] { engine_->add_lora_adapter(name, image); });
  } catch (const Error& e) {
    // The reason may quote the adapter's files: it goes to the log, never to the client.
    spdlog::warn("LoRA adapter '{}' was not loaded: {}", log_safe(name), log_safe(e.what()));
    refuse_lora_path(name);
  }
  spdlog::info("loaded LoRA adapter '{}' from {} in {:.1f} ms", log_safe(name), log_safe(path),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  std::lock_guard lock(mu_);
  lora_names_.push_back(name);
  lora_paths_[name] = path;
  lora_held_.insert(name);
}

void EngineLoop::unload_lora(const std::string& name) {
  {
    std::lock_guard lock(mu_);
    auto it = std::find(lora_names_.begin(), lora_names_.end(), name);
    if (it == lora_names_.end())
      throw ApiError(404, fmt::format("The lora adapter '{}' cannot be found.", name), "lora_name", "not_found_error");
    lora_names_.erase(it);  // new requests naming it are refused from now on
    lora_paths_.erase(name);
  }
  run_on_engine([&] { engine_->remove_lora_adapter(name); });
  spdlog::info("unloaded LoRA adapter '{}'", log_safe(name));
}

void EngineLoop::admit(std::deque<Pending>& batch, std::vector<RequestId>& aborts) {
  for (RequestId id : aborts) {
    routes_.erase(id);
    engine_->abort_request(id);
  }
  for (Pending& p : batch) {
    try {
      RequestId id = engine_->add_request(std::move(p.prompt), p.params, p.lora, std::move(p.lora_image));
      routes_[id] = Route{std::move(p.sink), p.choice};
      p.accepted.set_value(id);
    } catch (...) {
      p.accepted.set_exception(std::current_exception());
    }
  }
}

void EngineLoop::deliver(std::vector<RequestOutput> outs) {
  for (RequestOutput& out : outs) {
    auto it = routes_.find(out.id);
    if (it == routes_.end()) continue;  // aborted meanwhile
    bool finished = out.finished;
    it->second.sink->push(ChoiceOutput{it->second.choice, std::move(out)});
    if (finished) routes_.erase(it);
  }
}

// Finishes every request with "abort" so that no client waits forever on a broken engine.
void EngineLoop::fail_all() {
  for (auto& [id, route] : routes_) {
    RequestOutput out;
    out.id = id;
    out.finished = true;
    out.finish_reason = FinishReason::Abort;
    route.sink->push(ChoiceOutput{route.choice, std::move(out)});
    engine_->abort_request(id);
  }
  routes_.clear();
}

void EngineLoop::run() {
  for (;;) {
    std::deque<Pending> batch;
    std::vector<RequestId> aborts;
    std::deque<std::packaged_task<void()>> tasks;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !pending_.empty() || !aborts_.empty() || !tasks_.empty() || engine_->has_unfinished_requests();
      });
      if (stop_) break;
      batch.swap(pending_);
      aborts.swap(aborts_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();  // adapter changes, between steps (errors go to the caller)
    admit(batch, aborts);
    std::vector<RequestOutput> outs;
    bool stepped = false;
    try {
      if (engine_->has_unfinished_requests()) {
        stepped = true;
        outs = engine_->step();
      }
    } catch (const std::exception& e) {
      spdlog::error("engine step failed: {}; aborting its {} requests", e.what(), routes_.size());
      fail_all();
    }
    deliver(std::move(outs));
    EngineStats s = engine_->stats();
    std::vector<std::string> held;
    if (engine_->config().enable_lora) held = engine_->held_lora_names();
    const uint64_t tokens = s.prompt_tokens + s.generation_tokens;
    std::lock_guard lock(mu_);
    stats_ = s;
    lora_held_ = std::set<std::string>(held.begin(), held.end());
    if (stepped && tokens > step_tokens_seen_) iteration_tokens_.observe(double(tokens - step_tokens_seen_));
    step_tokens_seen_ = tokens;
  }
  // Shutting down: refuse what is still queued, abort what runs.
  std::lock_guard lock(mu_);
  for (Pending& p : pending_) p.accepted.set_exception(std::make_exception_ptr(Error("the engine is shutting down")));
  pending_.clear();
  for (auto& [id, route] : routes_) engine_->abort_request(id);
}

}  // namespace gs
