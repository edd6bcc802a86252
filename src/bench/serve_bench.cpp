// Implements bench/serve_bench.h.
#include "bench/serve_bench.h"

#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "bench/run_program.h"
#include "core/error.h"
#include "core/logging.h"

namespace gs {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

httplib::Client make_client(const ServeBenchConfig& cfg) {
  httplib::Client cli(cfg.base_url);
  GS_CHECK(cli.is_valid(), "--base-url '{}' is not a valid http:// URL", cfg.base_url);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(static_cast<time_t>(cfg.timeout_s));
  if (!cfg.api_key.empty()) cli.set_bearer_token_auth(cfg.api_key);
  return cli;
}

std::string served_model(const ServeBenchConfig& cfg) {
  if (!cfg.model.empty()) return cfg.model;
  auto cli = make_client(cfg);
  auto r = cli.Get("/v1/models");
  GS_CHECK(r && r->status == 200, "GET {}/v1/models failed ({}); is the server up? (or give --model)", cfg.base_url,
           r ? std::to_string(r->status) : httplib::to_string(r.error()));
  json j = json::parse(r->body, nullptr, false);
  GS_CHECK(j.is_object() && j.contains("data") && !j["data"].empty(), "GET /v1/models returned no model");
  return j["data"][0]["id"].get<std::string>();
}

std::string random_words(std::mt19937_64& rng, int n) {
  static const char* kWords[] = {"the",   "cat",    "sat",    "on",   "a",    "mat",  "and", "dog", "ran",
                                 "to",    "house",  "little", "girl", "big",  "tree", "sun", "day", "play",
                                 "happy", "friend", "water",  "red",  "ball", "went", "saw"};
  std::string p;
  for (int w = 0; w < n; ++w) {
    if (w) p += ' ';
    p += kWords[rng() % std::size(kWords)];
  }
  return p;
}

// The token ids of `text` from the server's /tokenize, or nullopt when it has none.
std::optional<std::vector<int>> tokenize(httplib::Client& cli, const std::string& model, const std::string& text) {
  auto r = cli.Post("/tokenize", json({{"model", model}, {"prompt", text}}).dump(), "application/json");
  if (!r || r->status != 200) return std::nullopt;
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) return std::nullopt;
  return j["tokens"].get<std::vector<int>>();
}

// A random completion prompt of exactly `n` tokens (as token ids), or words when the server
// cannot tokenize.
json random_prompt(httplib::Client& cli, const std::string& model, std::mt19937_64& rng, int n, bool& can_tokenize) {
  std::string text = random_words(rng, n);
  while (can_tokenize) {
    auto ids = tokenize(cli, model, text);
    if (!ids) {
      spdlog::warn("the server has no /tokenize: random prompts are {} words, not tokens", n);
      can_tokenize = false;
      break;
    }
    if (static_cast<int>(ids->size()) >= n) return json(std::vector<int>(ids->begin(), ids->begin() + n));
    text += ' ' + random_words(rng, n);
  }
  return text;
}

std::vector<json> load_prompts(const ServeBenchConfig& cfg, const std::string& model) {
  std::vector<json> prompts;
  if (!cfg.dataset.empty()) {
    std::ifstream in(cfg.dataset);
    GS_CHECK(in.good(), "--dataset: cannot open '{}'", cfg.dataset);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("prompt") && j["prompt"].is_string())
        prompts.push_back(j["prompt"]);
      else if (!j.is_discarded() && j.is_string())
        prompts.push_back(j.get<std::string>());
      else
        prompts.push_back(line);
    }
    GS_CHECK(!prompts.empty(), "--dataset '{}' has no prompts", cfg.dataset);
    std::vector<json> out;
    for (int i = 0; i < cfg.num_prompts; ++i) out.push_back(prompts[i % prompts.size()]);
    return out;
  }
  std::mt19937_64 rng(cfg.seed);
  auto cli = make_client(cfg);
  bool can_tokenize = cfg.endpoint == "/v1/completions";  // chat messages are text
  for (int i = 0; i < cfg.num_prompts; ++i)
    prompts.push_back(can_tokenize ? random_prompt(cli, model, rng, cfg.input_len, can_tokenize)
                                   : json(random_words(rng, cfg.input_len)));
  return prompts;
}

RequestResult send_one(const ServeBenchConfig& cfg, const std::string& model, const json& prompt,
                       Clock::time_point t0) {
  RequestResult res;
  res.start = since(t0);
  const auto begin = Clock::now();
  auto cli = make_client(cfg);
  const bool chat = cfg.endpoint == "/v1/chat/completions";
  json body = {{"model", model},
               {"max_tokens", cfg.output_len},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  for (const auto& [key, value] : cfg.sampling.items()) body[key] = value;
  if (chat)
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  else
    body["prompt"] = prompt;
  httplib::Request req;
  req.method = "POST";
  req.path = cfg.endpoint;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!cfg.api_key.empty()) req.set_header("Authorization", "Bearer " + cfg.api_key);
  std::string pending;
  double last = 0;
  int chunks = 0;
  bool done = false;
  std::string head;  // the first bytes of the body: an error answer's text
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (head.size() < 2000) head.append(data, std::min(len, 2000 - head.size()));
    pending.append(data, len);
    for (size_t pos; (pos = pending.find("\n\n")) != std::string::npos;) {
      std::string ev = pending.substr(0, pos);
      pending.erase(0, pos + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      if (ev == "data: [DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(ev.substr(6), nullptr, false);
      if (!j.is_object()) continue;
      if (j.contains("usage") && j["usage"].is_object()) {
        res.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        res.output_tokens = j["usage"].value("completion_tokens", 0);
      }
      // Every chunk with a choice carries a step's tokens, even when their text is empty (a
      // token that ends inside a UTF-8 character, or decodes to nothing): time them all.
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      const bool token = chat ? c.contains("delta") && !c["delta"].contains("role") : c.contains("text");
      if (!token) continue;  // chat's opening chunk carries the role, not a token
      const double now = std::chrono::duration<double>(Clock::now() - begin).count();
      if (chunks++ == 0)
        res.ttft = now;
      else
        res.itl.push_back(now - last);
      last = now;
    }
    return true;
  };
  auto r = cli.send(req);
  res.latency = std::chrono::duration<double>(Clock::now() - begin).count();
  if (!r)
    res.error = httplib::to_string(r.error());
  else if (r->status != 200)
    res.error = fmt::format("HTTP {}: {}", r->status, r->body.empty() ? head : r->body);
  else if (!done)
    res.error = "the stream ended without [DONE]";
  res.ok = res.error.empty();
  if (res.output_tokens == 0) res.output_tokens = chunks;
  return res;
}

// A counting semaphore that std::counting_semaphore would be, with a runtime bound.
class Slots {
 public:
  explicit Slots(int n) : free_(n) {}
  void acquire() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard l(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

json stats_ms(std::vector<double> v) {
  if (v.empty()) return {{"mean", 0}, {"median", 0}, {"p90", 0}, {"p99", 0}};
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {  // linear interpolation, as numpy.percentile
    double idx = p / 100.0 * (v.size() - 1);
    size_t lo = static_cast<size_t>(idx);
    size_t hi = std::min(lo + 1, v.size() - 1);
    return 1000.0 * (v[lo] + (v[hi] - v[lo]) * (idx - lo));
  };
  double sum = 0;
  for (double x : v) sum += x;
  return {{"mean", 1000.0 * sum / v.size()}, {"median", pct(50)}, {"p90", pct(90)}, {"p99", pct(99)}};
}

}  // namespace

ServeBenchResult run_serve_bench(const ServeBenchConfig& cfg) {
  GS_CHECK(cfg.num_prompts >= 1, "--num-prompts must be >= 1, got {}", cfg.num_prompts);
  GS_CHECK(cfg.input_len >= 1 && cfg.output_len >= 1, "--input-len and --output-len must be >= 1");
  GS_CHECK(cfg.request_rate > 0, "--request-rate must be > 0 (inf: all at once), got {}", cfg.request_rate);
  GS_CHECK(cfg.max_concurrency >= 0, "--max-concurrency must be >= 0, got {}", cfg.max_concurrency);
  ServeBenchResult out;
  out.config = cfg;
  GS_CHECK(cfg.endpoint == "/v1/completions" || cfg.endpoint == "/v1/chat/completions",
           "--endpoint must be /v1/completions or /v1/chat/completions, got '{}'", cfg.endpoint);
  out.model = served_model(cfg);
  const auto prompts = load_prompts(cfg, out.model);
  out.requests.resize(prompts.size());
  Slots slots(cfg.max_concurrency > 0 ? cfg.max_concurrency : static_cast<int>(prompts.size()));
  std::mt19937_64 rng(cfg.seed);
  std::exponential_distribution<double> gap(std::isinf(cfg.request_rate) ? 1.0 : cfg.request_rate);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  double arrival = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!std::isinf(cfg.request_rate)) {
      std::this_thread::sleep_until(
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival)));
      arrival += gap(rng);
    }
    slots.acquire();
    threads.emplace_back([&, i] {
      out.requests[i] = send_one(cfg, out.model, prompts[i], t0);
      slots.release();
    });
  }
  for (auto& t : threads) t.join();
  out.duration_s = since(t0);
  return out;
}

json ServeBenchResult::summary() const {
  int ok = 0;
  long in_tok = 0, out_tok = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  std::string first_error;
  std::vector<std::string> errors;
  for (const auto& r : requests) {
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      if (errors.size() < 10 && std::find(errors.begin(), errors.end(), r.error) == errors.end())
        errors.push_back(r.error);  // the server's own error text, as it answered
      continue;
    }
    ++ok;
    in_tok += r.prompt_tokens;
    out_tok += r.output_tokens;
    ttft.push_back(r.ttft);
    e2e.push_back(r.latency);
    if (r.output_tokens > 1) tpot.push_back((r.latency - r.ttft) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  const double d = std::max(duration_s, 1e-9);
  json s = {{"base_url", config.base_url},
            {"model", model},
            {"num_prompts", config.num_prompts},
            {"endpoint", config.endpoint},
            {"input_len", config.input_len},
            {"output_len", config.output_len},
            {"request_rate", std::isinf(config.request_rate) ? json("inf") : json(config.request_rate)},
            {"max_concurrency", config.max_concurrency},
            {"sampling", config.sampling},
            {"duration_s", duration_s},
            {"completed", ok},
            {"failed", static_cast<int>(requests.size()) - ok},
            {"total_input_tokens", in_tok},
            {"total_output_tokens", out_tok},
            {"request_throughput", ok / d},
            {"output_throughput", out_tok / d},
            {"total_token_throughput", (in_tok + out_tok) / d},
            {"ttft_ms", stats_ms(ttft)},
            {"tpot_ms", stats_ms(tpot)},
            {"itl_ms", stats_ms(itl)},
            {"e2el_ms", stats_ms(e2e)}};
  // vLLM's flat keys (mean_ttft_ms, p99_itl_ms, ...), beside the nested objects above.
  for (const char* m : {"ttft", "tpot", "itl", "e2el"})
    for (const char* k : {"mean", "median", "p90", "p99"})
      s[fmt::format("{}_{}_ms", k, m)] = s[std::string(m) + "_ms"][k];
  if (!first_error.empty()) s["first_error"] = first_error;
  if (!errors.empty()) s["errors"] = errors;
  return s;
}

std::string format_summary(const json& s) {
  std::string o = "============ Serving Benchmark Result ============\n";
  auto row = [&](const std::string& k, const std::string& v) { o += fmt::format("{:<40}{:>10}\n", k, v); };
  row("Successful requests:", std::to_string(s["completed"].get<int>()));
  row("Failed requests:", std::to_string(s["failed"].get<int>()));
  if (s.contains("sampling")) o += fmt::format("{:<40}{:>10}\n", "Sampling:", s["sampling"].dump());
  row("Benchmark duration (s):", fmt::format("{:.2f}", s["duration_s"].get<double>()));
  row("Total input tokens:", std::to_string(s["total_input_tokens"].get<long>()));
  row("Total generated tokens:", std::to_string(s["total_output_tokens"].get<long>()));
  row("Request throughput (req/s):", fmt::format("{:.2f}", s["request_throughput"].get<double>()));
  row("Output token throughput (tok/s):", fmt::format("{:.2f}", s["output_throughput"].get<double>()));
  row("Total token throughput (tok/s):", fmt::format("{:.2f}", s["total_token_throughput"].get<double>()));
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    const json& st = s[std::string(m) + "_ms"];
    for (const char* k : {"mean", "median", "p90", "p99"})
      row(fmt::format("{} {} (ms):", k, m), fmt::format("{:.2f}", st[k].get<double>()));
  }
  if (s.contains("first_error")) o += "first error: " + s["first_error"].get<std::string>() + "\n";
  return o + "==================================================\n";
}

void plot_serve_bench(const ServeBenchResult& r, const std::string& png_path) {
  namespace fs = std::filesystem;
  const fs::path data = fs::path(png_path).replace_extension(".dat");
  const fs::path script = fs::path(png_path).replace_extension(".gp");
  {
    std::ofstream out(data);
    GS_CHECK(out.good(), "--plot: cannot write '{}'", data.string());
    for (const auto& q : r.requests)
      if (q.ok) out << fmt::format("{} {} {}\n", q.start, q.ttft * 1000, q.latency * 1000);
  }
  {
    // Every variable text (paths, the model id, which a server chooses) reaches gnuplot as an
    // argument (ARG1..ARG3, string values), never as script text.
    std::ofstream out(script);
    GS_CHECK(out.good(), "--plot: cannot write '{}'", script.string());
    out << "set terminal pngcairo noenhanced size 1000,600\n"
           "set output ARG1\n"
           "set title ARG2\n"
           "set xlabel 'request start (s)'\nset ylabel 'ms'\nset grid\n"
           "plot ARG3 using 1:2 with points pt 7 ps 0.6 title 'TTFT', \\\n"
           "     ARG3 using 1:3 with points pt 7 ps 0.6 title 'end-to-end latency'\n";
  }
  const std::string title = fmt::format("bench serve: {} ({} prompts, in {}, out {})", r.model, r.config.num_prompts,
                                        r.config.input_len, r.config.output_len);
  const int rc = run_program({"gnuplot", "-c", script.string(), png_path, title, data.string()});
  GS_CHECK(rc == 0, "--plot: gnuplot failed with status {} (is it installed?); the data is in {}", rc, data.string());
  fs::remove(data);
  fs::remove(script);
}

}  // namespace gs
