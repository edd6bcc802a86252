// EngineLoop: runs an LLMEngine on its own thread and serves it to HTTP threads as an
// EngineClient. The thread takes new requests, aborts and LoRA adapter changes from a queue
// (between steps), steps while there is work, and delivers each output to its request's
// OutputQueue. Adapters are read from disk on the HTTP thread that asks, not on the step loop:
// run-time loads, and a request naming an adapter that the host cache (--max-cpu-loras) dropped.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "engine/llm_engine.h"
#include "server/engine_client.h"
#include "tokenizer/tokenizer.h"

namespace gs {

class EngineLoop : public EngineClient {
 public:
  // Takes over `engine`; `chat_template` (if not empty) replaces the tokenizer's; `names`
  // (if given) are every name clients may use for the model.
  explicit EngineLoop(std::unique_ptr<LLMEngine> engine, std::string chat_template = "",
                      const std::vector<std::string>& names = {});
  ~EngineLoop() override;  // aborts what is left and joins the thread

  const ServedModel& model() const override { return model_; }
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::vector<int32_t> encode_bounded(std::string_view text, bool add_special_tokens, size_t max_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const override;
  std::string token_text(int32_t id) const override;
  RequestId submit(std::vector<int32_t> prompt_ids, const SamplingParams& params, std::shared_ptr<OutputQueue> sink,
                   int choice, const std::string& lora) override;
  void abort(RequestId id) override;
  int num_waiting() const override;
  EngineStats stats() const override;
  Histogram iteration_tokens() const override;
  std::vector<std::string> lora_names() const override;
  void load_lora(const std::string& name, const std::string& path) override;
  void unload_lora(const std::string& name) override;
  std::shared_ptr<const structured::CompiledGrammar> compile_constraint(
      const structured::ConstraintSpec& spec) const override;

 private:
  struct Pending {
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::shared_ptr<OutputQueue> sink;
    int choice = 0;
    std::promise<RequestId> accepted;  // or the engine's error
    std::string lora;
    std::shared_ptr<const LoraSlotImage> lora_image;  // read here when the engine no longer held it
  };
  struct Route {
    std::shared_ptr<OutputQueue> sink;
    int choice = 0;
  };
  void run();
  void admit(std::deque<Pending>& batch, std::vector<RequestId>& aborts);
  void deliver(std::vector<RequestOutput> outs);
  void fail_all();
  // The adapter `lora` read from its directory when the engine does not hold it, else nullptr.
  // Throws gs::Error naming the directory when it cannot be read.
  std::shared_ptr<const LoraSlotImage> read_if_dropped(const std::string& lora) const;
  // Runs f on the engine thread between steps; returns when it has run (rethrows its error).
  void run_on_engine(std::function<void()> f);

  std::unique_ptr<LLMEngine> engine_;
  Tokenizer tokenizer_;  // a copy sharing the immutable tables: safe to use from any thread
  ServedModel model_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<RequestId> aborts_;
  std::deque<std::packaged_task<void()>> tasks_;   // run between steps
  std::vector<std::string> lora_names_;            // served adapters (what requests may name)
  std::set<std::string> lora_loading_;             // names of adapters being read
  std::set<std::string> lora_held_;                // served adapters in host memory (after the last step)
  std::map<std::string, std::string> lora_paths_;  // served adapters' PEFT directories
  EngineStats stats_;
  Histogram iteration_tokens_{token_count_bounds()};  // tokens of each step
  uint64_t step_tokens_seen_ = 0;                     // prompt + generated tokens before this step
  bool stop_ = false;
  std::unordered_map<RequestId, Route> routes_;  // engine thread only
  std::thread thread_;
};

}  // namespace gs
