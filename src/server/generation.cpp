// Implements server/generation.h (Generation).
#include "server/generation.h"

#include "core/error.h"

namespace gs {

namespace {
double seconds(Generation::Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

Generation::Generation(GenerationRequest req, std::string model, EngineClient& client, Metrics& metrics,
                       std::function<void()> on_done)
    : req_(std::move(req)),
      client_(&client),
      metrics_(&metrics),
      on_done_(std::move(on_done)),
      builder_(req_, std::move(model), client),
      timing_(req_.num_choices()) {
  try {
    for (int c = 0; c < req_.num_choices(); ++c) {
      SamplingParams p = req_.params;
      // n samples of one prompt must differ, yet stay reproducible under a seed.
      if (p.seed && req_.n > 1) p.seed = *p.seed + static_cast<uint64_t>(c % req_.n);
      timing_[c].start = timing_[c].last = Clock::now();
      ids_.push_back(client.submit(req_.prompt_of(c), p, queue_, c, req_.lora));
    }
  } catch (...) {
    for (RequestId id : ids_) client.abort(id);
    if (on_done_) on_done_();
    throw;
  }
}

Generation::~Generation() {
  queue_->set_listener(nullptr);
  for (size_t c = 0; c < ids_.size(); ++c) {
    if (builder_.finished(static_cast<int>(c))) continue;
    client_->abort(ids_[c]);
    metrics_->on_finished("abort", static_cast<int>(req_.prompt_of(static_cast<int>(c)).size()), 0,
                          seconds(Clock::now() - timing_[c].start));
  }
  if (on_done_) on_done_();
}

void Generation::record(const ChoiceOutput& item) {
  if (item.choice < 0 || item.choice >= static_cast<int>(timing_.size())) return;
  Timing& t = timing_[item.choice];
  const auto now = Clock::now();
  if (!item.out.new_token_ids.empty()) {
    if (t.first) {
      metrics_->on_first_token(seconds(now - t.start));
      const RequestOutput& o = item.out;  // engine clock
      if (o.scheduled_time > 0.0 && o.first_token_time >= o.scheduled_time)
        metrics_->on_first_token_phases(o.scheduled_time - o.arrival_time, o.first_token_time - o.scheduled_time);
      t.first_token = now;
    } else {
      metrics_->on_inter_token(seconds(now - t.last));
    }
    t.first = false;
    t.last = now;
  }
  if (!item.out.error.empty() && error_.empty()) error_ = item.out.error;
  if (item.out.finished && !builder_.finished(item.choice)) {
    FinishReason r = item.out.finish_reason == FinishReason::None ? FinishReason::Stop : item.out.finish_reason;
    if (!t.first) metrics_->on_decode_time(seconds(now - t.first_token));
    metrics_->on_finished(finish_reason_string(r), item.out.num_prompt_tokens, item.out.num_output_tokens,
                          seconds(now - t.start));
  }
}

std::optional<std::vector<nlohmann::json>> Generation::next(std::chrono::milliseconds timeout) {
  std::optional<ChoiceOutput> item = queue_->pop(timeout);
  if (!item) return std::nullopt;
  record(*item);
  return builder_.add(*item);
}

std::string Generation::stream_opening() {
  if (format_) return format_->opening(*this);
  std::string out;
  for (const nlohmann::json& c : builder_.opening_chunks()) out += sse_event(c);
  return out;
}

std::string Generation::stream_events(const std::vector<nlohmann::json>& chunks) {
  if (format_) return format_->events(*this, chunks);
  std::string out;
  for (const nlohmann::json& c : chunks) {
    if (!req_.continuous_usage) {
      out += sse_event(c);
      continue;
    }
    nlohmann::json with_usage = c;  // stream_options.continuous_usage_stats: usage so far on every chunk
    with_usage["usage"] = builder_.usage();
    out += sse_event(with_usage);
  }
  return out;
}

std::string Generation::stream_closing() {
  if (format_) return format_->closing(*this);
  return (req_.include_usage ? sse_event(builder_.usage_chunk()) : "") + sse_done();
}

std::string Generation::final_body() {
  if (format_) return format_->body(*this);
  return builder_.response().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gs
