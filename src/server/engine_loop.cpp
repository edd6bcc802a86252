// Implements server/engine_loop.h (EngineLoop).
#include "server/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "core/logging.h"
#include "model/model_config.h"
#include "server/api_error.h"

namespace gs {

EngineLoop::EngineLoop(std::unique_ptr<LLMEngine> engine, std::string chat_template,
                       const std::vector<std::string>& names)
    : engine_(std::move(engine)), tokenizer_(engine_->tokenizer()) {
  model_.name = engine_->model_name();
  for (const std::string& n : names)
    if (n != model_.name) model_.aliases.push_back(n);
  model_.max_model_len = engine_->max_model_len();
  lora_names_ = engine_->lora_names();
  model_.vocab_size = tokenizer_.size();
  model_.sampling_defaults = engine_->default_sampling_params();
  model_.chat_template = chat_template.empty() ? tokenizer_.chat_template() : chat_template;
  model_.bos_token = tokenizer_.bos_token();
  model_.eos_token = tokenizer_.eos_token();
  stats_ = engine_->stats();
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
  std::future<RequestId> accepted;
  {
    std::lock_guard lock(mu_);
    GS_CHECK(!stop_, "the engine is shutting down");
    Pending p{std::move(prompt_ids), params, std::move(sink), choice, {}, lora};
    accepted = p.accepted.get_future();
    pending_.push_back(std::move(p));
  }
  cv_.notify_all();
  return accepted.get();  // rethrows the engine's gs::Error
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
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    throw ApiError(404, fmt::format("No adapter found at '{}': it is not a directory", path), "lora_path",
                   "not_found_error");
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const LoraSlotImage> image;
  try {
    image = engine_->read_lora_adapter(name, path);  // the slow part, on this thread
    run_on_engine([&] { engine_->add_lora_adapter(name, image); });
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "lora_path");
  }
  spdlog::info("loaded LoRA adapter '{}' from {} in {:.1f} ms", name, path,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  std::lock_guard lock(mu_);
  lora_names_.push_back(name);
}

void EngineLoop::unload_lora(const std::string& name) {
  {
    std::lock_guard lock(mu_);
    auto it = std::find(lora_names_.begin(), lora_names_.end(), name);
    if (it == lora_names_.end())
      throw ApiError(404, fmt::format("The lora adapter '{}' cannot be found.", name), "lora_name", "not_found_error");
    lora_names_.erase(it);  // new requests naming it are refused from now on
  }
  run_on_engine([&] { engine_->remove_lora_adapter(name); });
  spdlog::info("unloaded LoRA adapter '{}'", name);
}

void EngineLoop::admit(std::deque<Pending>& batch, std::vector<RequestId>& aborts) {
  for (RequestId id : aborts) {
    routes_.erase(id);
    engine_->abort_request(id);
  }
  for (Pending& p : batch) {
    try {
      RequestId id = engine_->add_request(std::move(p.prompt), p.params, p.lora);
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
    try {
      if (engine_->has_unfinished_requests()) outs = engine_->step();
    } catch (const std::exception& e) {
      spdlog::error("engine step failed: {}; aborting its {} requests", e.what(), routes_.size());
      fail_all();
    }
    deliver(std::move(outs));
    EngineStats s = engine_->stats();
    std::lock_guard lock(mu_);
    stats_ = s;
  }
  // Shutting down: refuse what is still queued, abort what runs.
  std::lock_guard lock(mu_);
  for (Pending& p : pending_) p.accepted.set_exception(std::make_exception_ptr(Error("the engine is shutting down")));
  pending_.clear();
  for (auto& [id, route] : routes_) engine_->abort_request(id);
}

}  // namespace gs
