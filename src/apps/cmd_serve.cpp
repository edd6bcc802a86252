// graphserve serve: the OpenAI-compatible HTTP server. With no --model it serves the built-in
// dummy preset, so `graphserve serve` alone starts a working server.
// SIGTERM / SIGINT: stop taking requests, let in-flight ones finish (--shutdown-timeout), exit 0.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/resource.h>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/vllm_flags.h"
#include "core/env.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine.h"
#include "server/api_server.h"
#include "server/chat_prompt.h"
#include "server/engine_loop.h"
#include "server/lora_policy.h"
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
  bool dry_run = false;
  std::vector<std::string> vllm_notes;  // one line per vLLM flag given that changes nothing here
};

// --dry-run: the settings the flags resolve to, as JSON on stdout.
void print_resolved(const ServeArgs& a) {
  const EngineConfig& c = a.cfg;
  nlohmann::json j = {{"model", c.model},
                      {"served_model_names", a.served_names},
                      {"dtype", c.dtype},
                      {"max_model_len", c.max_model_len},
                      {"max_num_seqs", c.max_num_seqs},
                      {"max_num_batched_tokens", c.max_num_batched_tokens},
                      {"kv_cache_memory_bytes", c.kv_cache_memory_bytes},
                      {"tensor_parallel_size", c.tensor_parallel_size},
                      {"enable_expert_parallel", c.enable_expert_parallel},
                      {"enable_prefix_caching", c.enable_prefix_caching},
                      {"runner", c.runner},
                      {"cudagraph_capture_sizes", c.compilation.cudagraph_capture_sizes},
                      {"host", a.server.host},
                      {"port", a.server.port},
                      {"access_log", a.server.http.access_log}};
  fmt::print("{}\n", j.dump(1));
}

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

// Binds host:port for a moment, so that a port in use is reported before the model loads (the
// server binds it for good once the engine is up).
void check_port_free(const std::string& host, int port) {
  if (port == 0) return;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    fail("--host '{}': not an address this machine can listen on", host);
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> hold(res, freeaddrinfo);
  const int fd = ::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (fd < 0) return;  // the real bind reports it
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const int rc = ::bind(fd, res->ai_addr, res->ai_addrlen);
  const int err = errno;
  ::close(fd);
  GS_CHECK(rc == 0, "cannot listen on {}:{}: {}{}", host, port, std::strerror(err),
           err == EADDRINUSE ? " (another server runs there: stop it or pass --port)" : "");
}

// Each connection is a file descriptor: allow as many as the hard limit permits.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

// Run-time LoRA updates: --allow-runtime-lora-updating or vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING;
// adapters load from --lora-dir, by default the directories holding the --lora-modules adapters.
void finish_lora_policy(const EngineConfig& cfg, LoraRoutePolicy& policy) {
  if (const char* env = env_value("VLLM_ALLOW_RUNTIME_LORA_UPDATING"); env && runtime_lora_switch_on(env))
    policy.allow_runtime_updating = true;
  if (policy.roots.empty())
    for (const auto& [name, path] : cfg.lora_modules)
      policy.roots.push_back(std::filesystem::absolute(path).parent_path().string());
  if (policy.allow_runtime_updating)
    spdlog::warn("run-time LoRA updating is on: clients may load adapters from {}",
                 policy.roots.empty() ? "nowhere (give --lora-dir)" : fmt::format("{}", fmt::join(policy.roots, ", ")));
}

void run(ServeArgs& a) {
  finish_engine_options(a.cfg);
  for (const std::string& note : a.vllm_notes) spdlog::info("{}", note);
  // vLLM serves the --model string as the model's name; the directory's name stays one too.
  if (a.served_names.empty() && !a.cfg.model.empty()) a.served_names.push_back(a.cfg.model);
  finish_lora_policy(a.cfg, a.server.lora);
  validate(a.server.chat_output);
  if (a.dry_run) return print_resolved(a);
  check_port_free(a.server.host, a.server.port);
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

#ifndef GS_VERSION
#define GS_VERSION "unknown"
#endif

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  args->server.version = GS_VERSION;
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
  cmd->add_flag(
      "--allow-runtime-lora-updating", s.lora.allow_runtime_updating,
      "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (as VLLM_ALLOW_RUNTIME_LORA_UPDATING=true)");
  cmd->add_option("--lora-dir", s.lora.roots,
                  "directories run-time LoRA adapters may be loaded from (default: those of --lora-modules)");
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
  cmd->add_option("--max-stored-responses", s.max_stored_responses,
                  "Responses API: finished responses kept in memory for previous_response_id (0: none)")
      ->capture_default_str();
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
  cmd->add_flag(
      "--enable-log-requests,!--no-enable-log-requests", [&s](int64_t n) { s.http.access_log = n > 0; },
      "an access log line per request (the default)");
  cmd->add_flag("--disable-log-stats", args->disable_log_stats, "no periodic throughput / load log line");
  cmd->add_flag("--dry-run", args->dry_run,
                "check the flags, log what each vLLM-only flag does, print the resolved settings and exit");
  cmd->add_option("--shutdown-timeout", args->shutdown_timeout_s, "seconds to let in-flight requests finish on SIGTERM")
      ->capture_default_str();
  add_vllm_flags(*cmd, args->cfg, args->vllm_notes);  // last: flags declared above take precedence
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
