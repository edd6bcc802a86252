// Generation: one in-flight /v1/completions or /v1/chat/completions request: its engine
// requests (one per choice), their outputs, response building and latency metrics.
// Destroying it aborts whatever has not finished (a client that went away frees its KV blocks).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_client.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace gs {

class Generation;

// How a Generation's outputs become the HTTP body, for an API other than chat / completions
// (the Responses API). Each method returns bytes ready to send (Server-Sent Events or JSON).
class OutputFormat {
 public:
  virtual ~OutputFormat() = default;
  virtual std::string opening(Generation& gen) = 0;                                            // stream start
  virtual std::string events(Generation& gen, const std::vector<nlohmann::json>& chunks) = 0;  // chunks as events
  virtual std::string closing(Generation& gen) = 0;                                            // stream end
  virtual std::string body(Generation& gen) = 0;                                               // the whole answer
};

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  // Submits every choice; throws gs::Error (after aborting those already submitted) when the
  // engine refuses one. `on_done` runs once, at destruction.
  Generation(GenerationRequest req, std::string model, EngineClient& client, Metrics& metrics,
             std::function<void()> on_done);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  const GenerationRequest& request() const { return req_; }
  ResponseBuilder& builder() { return builder_; }
  // Waits up to `timeout` for the next output, records it, returns its stream chunks
  // (nullopt on timeout).
  std::optional<std::vector<nlohmann::json>> next(std::chrono::milliseconds timeout);
  bool finished() const { return builder_.all_finished(); }
  // Why the engine aborted a choice ("" when none failed): its step threw on it alone.
  const std::string& error() const { return error_; }
  // The HTTP body in the request's API: chat / completions unless a format is set.
  void set_format(std::unique_ptr<OutputFormat> format) { format_ = std::move(format); }
  std::string stream_opening();
  std::string stream_events(const std::vector<nlohmann::json>& chunks);
  std::string stream_closing();
  std::string final_body();
  // Called (on the engine's thread, must not block) whenever an output arrives.
  void set_listener(std::function<void()> listener) { queue_->set_listener(std::move(listener)); }

 private:
  struct Timing {
    Clock::time_point start, last, first_token;
    bool first = true;
  };
  void record(const ChoiceOutput& item);

  GenerationRequest req_;
  EngineClient* client_;
  Metrics* metrics_;
  std::function<void()> on_done_;
  std::shared_ptr<OutputQueue> queue_ = std::make_shared<OutputQueue>();
  ResponseBuilder builder_;
  std::vector<RequestId> ids_;
  std::vector<Timing> timing_;
  std::string error_;
  std::unique_ptr<OutputFormat> format_;
};

}  // namespace gs
