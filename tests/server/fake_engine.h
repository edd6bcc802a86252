// FakeEngine: an EngineClient with a byte tokenizer and a thread that emits one letter per
// request every `tick_ms` milliseconds (1 by default), so HTTP behaviour is tested without a model.
// A prompt starting with 'S' ends with finish_reason "stop" after 3 tokens (unless ignore_eos).
// A prompt starting with 'E' gets tokens whose text is empty (as a token that ends inside a
// UTF-8 character, or decodes to nothing). With set_script(text), every request's output is
// `text`, one byte a token, ending with "stop" (crafted model output, e.g. tool calls).
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "server/engine_client.h"

namespace gs::test {

class FakeEngine : public EngineClient {
 public:
  FakeEngine() {
    model_.name = "fake";
    model_.max_model_len = 128;
    model_.vocab_size = 258;
    thread_ = std::thread([this] { run(); });
  }
  ~FakeEngine() override {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ServedModel& mutable_model() { return model_; }
  const ServedModel& model() const override { return model_; }
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string decode(std::span<const int32_t> ids, bool = false) const override {
    return std::string(ids.begin(), ids.end());
  }
  std::string token_text(int32_t id) const override { return std::string(1, char(id)); }
  RequestId submit(std::vector<int32_t> prompt, const SamplingParams& p, std::shared_ptr<OutputQueue> sink, int choice,
                   const std::string& lora) override {
    GS_CHECK(lora.empty(), "fake serves no LoRA adapters");
    GS_CHECK(p.temperature != 1.5f, "fake refuses temperature 1.5");
    std::lock_guard l(mu_);
    RequestId id = ++next_id_;
    live_[id] = Live{std::move(prompt), p, std::move(sink), choice, 0};
    ++submitted;
    cv_.notify_all();
    return id;
  }
  void abort(RequestId id) override {
    std::lock_guard l(mu_);
    if (live_.erase(id)) ++aborted;
  }
  int num_waiting() const override { return waiting.load(); }
  EngineStats stats() const override {
    std::lock_guard l(mu_);
    EngineStats s;
    s.num_running = static_cast<int>(live_.size());
    s.kv_blocks_total = 1000;
    s.kv_blocks_free = 1000 - static_cast<int>(live_.size());
    s.fatal_error = fatal_error;
    return s;
  }
  std::vector<std::string> lora_names() const override {
    std::lock_guard l(mu_);
    return loras_;
  }
  void set_lora_names(std::vector<std::string> names) {
    std::lock_guard l(mu_);
    loras_ = std::move(names);
  }
  void set_script(std::string text) {
    std::lock_guard l(mu_);
    script_ = std::move(text);
  }
  void load_lora(const std::string&, const std::string&) override { GS_CHECK(false, "fake serves no LoRA adapters"); }
  void unload_lora(const std::string&) override { GS_CHECK(false, "fake serves no LoRA adapters"); }
  std::string fatal_error;  // set by a test: the engine failed (a tensor-parallel worker died)
  int live() const {
    std::lock_guard l(mu_);
    return static_cast<int>(live_.size());
  }

  std::atomic<int> submitted{0}, aborted{0}, waiting{0}, tick_ms{1};

 private:
  struct Live {
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::shared_ptr<OutputQueue> sink;
    int choice;
    int produced;
  };
  void run() {
    std::unique_lock l(mu_);
    while (!stop_) {
      cv_.wait_for(l, std::chrono::milliseconds(tick_ms.load()));
      for (auto it = live_.begin(); it != live_.end();) {
        Live& r = it->second;
        RequestOutput o;
        o.id = it->first;
        const bool scripted = !script_.empty();
        int32_t tok =
            scripted ? static_cast<unsigned char>(script_[size_t(r.produced) % script_.size()]) : 'a' + r.produced % 26;
        o.new_token_ids = {tok};
        o.new_text = r.prompt[0] == 'E' && !scripted ? std::string() : std::string(1, char(tok));
        o.num_prompt_tokens = static_cast<int>(r.prompt.size());
        o.num_output_tokens = ++r.produced;
        o.arrival_time = 1.0, o.scheduled_time = 1.25, o.first_token_time = 1.75;  // queue 0.25 s, prefill 0.5 s
        if (r.params.logprobs >= 0) o.logprobs.push_back({tok, -0.5f, {{tok, -0.5f}}});
        bool stop = scripted ? size_t(r.produced) == script_.size()
                             : r.prompt[0] == 'S' && !r.params.ignore_eos && r.produced == 3;
        if (stop || r.produced >= r.params.max_tokens) {
          o.finished = true;
          o.finish_reason = stop ? FinishReason::Stop : FinishReason::Length;
        }
        const bool done = o.finished;
        r.sink->push(ChoiceOutput{r.choice, std::move(o)});
        it = done ? live_.erase(it) : std::next(it);
      }
    }
  }

  ServedModel model_;
  std::vector<std::string> loras_;
  std::string script_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Live> live_;
  RequestId next_id_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gs::test
