// graphserve serve: the OpenAI-compatible HTTP server. With no --model it serves the built-in
// dummy preset, so `graphserve serve` alone starts a working server.
// SIGTERM / SIGINT: stop taking requests, let in-flight ones finish (--shutdown-timeout), exit 0.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <pthread.h>
#include <sys/resource.h>

#include <fmt/format.h>

#include "apps/commands.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine.h"
#include "server/api_server.h"
#include "server/chat_prompt.h"
#include "server/engine_loop.h"
#include "server/stats_logger.h"

namespace gs {
namespace {

struct ServeArgs {
  EngineConfig cfg;
  ServerConfig server;
  std::string chat_template;  // a file, or the template itself
  std::vector<std::string> served_names;
  double shutdown_timeout_s = 30.0;
  bool disable_log_stats = false;
};

// --chat-template: a file's contents, or the argument itself when it is an inline template.
std::string load_chat_template(const std::string& arg) {
  if (arg.empty()) return "";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(arg, ec)) {
    GS_CHECK(arg.find("{{") != std::string::npos || arg.find("{%") != std::string::npos,
             "--chat-template '{}': no such file, and not an inline Jinja template (no '{{{{' or '{{%')", arg);
    return arg;
  }
  std::ifstream in(arg, std::ios::binary);
  GS_CHECK(in.good(), "--chat-template: cannot open '{}'", arg);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Blocks SIGINT/SIGTERM in this thread and every thread it starts after; they are taken with
// sigwait() instead of an async handler.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// A duration option given in (fractional) seconds.
void add_ms_option(CLI::App& cmd, const std::string& name, std::chrono::milliseconds& out, const std::string& help) {
  cmd.add_option_function<double>(
         name, [&out](double s) { out = std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }, help)
      ->default_str(fmt::format("{}", out.count() / 1000.0))
      ->check(CLI::Range(0.001, 86400.0));
}

// Each connection is a file descriptor: allow as many as the hard limit permits.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

void run(ServeArgs& a) {
  finish_engine_options(a.cfg);
  validate(a.server.chat_output);
  GS_CHECK(a.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0 seconds, got {}", a.shutdown_timeout_s);
  const std::string tmpl = load_chat_template(a.chat_template);
  preparse_chat_template(tmpl);  // a broken template is an error now, before the model loads
  const sigset_t stop_signals = block_stop_signals();
  raise_fd_limit();
  EngineLoop engine(std::make_unique<LLMEngine>(a.cfg), tmpl, a.served_names);
  ApiServer server(engine, a.server);
  server.start();
  std::optional<StatsLogger> stats_log;
  if (!a.disable_log_stats) stats_log.emplace(engine, std::chrono::seconds(10));
  spdlog::info("serving '{}' at http://{}:{}/v1 (max_model_len {}, chat template: {})", engine.model().name,
               a.server.host, server.port(), engine.model().max_model_len,
               engine.model().chat_template.empty() ? "none" : "yes");
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("{}: finishing {} in-flight requests (up to {} s), then exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               server.in_flight(), a.shutdown_timeout_s);
  const bool drained = server.shutdown(std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout_s * 1000)));
  if (!drained) spdlog::warn("shutdown timeout: unfinished requests were aborted");
  spdlog::info("server stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, ...)");
  add_engine_options(*cmd, args->cfg, &args->served_names);
  cmd->add_option("model_tag", args->cfg.model, "Hugging Face model directory (the same as --model)");
  ServerConfig& s = args->server;
  cmd->add_option("--host", s.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", s.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1 routes")
      ->envname("GRAPHSERVE_API_KEY");
  cmd->add_option("--chat-template", args->chat_template,
                  "Jinja chat template: a file, or the template itself (default: the tokenizer's)");
  cmd->add_flag("--enable-auto-tool-choice", s.chat_output.enable_auto_tool_choice,
                "tool_choice \"auto\": parse the model's tool calls (needs --tool-call-parser)");
  cmd->add_option("--tool-call-parser", s.chat_output.tool_call_parser,
                  "how tool calls are read from the output: hermes, llama3_json, mistral, pythonic");
  cmd->add_option("--reasoning-parser", s.chat_output.reasoning_parser,
                  "move <think>...</think> into reasoning_content: deepseek_r1, qwen3");
  cmd->add_option("--max-waiting-requests", s.max_waiting_requests, "queued requests beyond which new ones get 503")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "largest request body (413 above)")->capture_default_str();
  cmd->add_option("--http-threads", s.http_threads, "worker threads that parse, tokenize and submit requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--io-threads", s.io_threads, "threads running every connection's I/O")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--max-header-bytes", s.http.max_header_bytes, "largest request header block (431 above)")
      ->capture_default_str();
  add_ms_option(*cmd, "--keep-alive-timeout", s.http.idle_timeout, "seconds an idle connection is kept open");
  add_ms_option(*cmd, "--header-timeout", s.http.header_timeout, "seconds to receive all headers of a request");
  add_ms_option(*cmd, "--body-timeout", s.http.body_timeout, "seconds to receive a request body");
  add_ms_option(*cmd, "--write-timeout", s.http.write_timeout,
                "seconds a write may wait on a client that does not read");
  cmd->add_flag(
      "--disable-log-requests", [&s](int64_t) { s.http.access_log = false; }, "no access log line per request");
  cmd->add_flag("--disable-log-stats", args->disable_log_stats, "no periodic throughput / load log line");
  cmd->add_option("--shutdown-timeout", args->shutdown_timeout_s, "seconds to let in-flight requests finish on SIGTERM")
      ->capture_default_str();
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
