// Implements apps/vllm_flag_table.h: the vLLM flags graphserve has no setting for, and why.
// Flags graphserve honours with settings of its own (--model, --max-model-len, -tp, ...) are
// declared by engine_options.cpp and cmd_serve.cpp, not here.
#include "apps/vllm_flag_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "apps/vllm_flags.h"

namespace gs {
namespace {

using A = FlagArity;

VllmFlag noop(std::string names, A arity, std::string example, std::string note) {
  VllmFlag f;
  f.names = std::move(names);
  f.arity = arity;
  f.example = std::move(example);
  f.note = std::move(note);
  return f;
}

// Accepted (as a no-op) for `accepted` values only; others are refused with `refusal`.
VllmFlag only(std::string names, std::vector<std::string> accepted, std::string refusal, std::string note) {
  VllmFlag f = noop(std::move(names), A::Value, accepted.front(), std::move(note));
  f.accepted = std::move(accepted);
  f.refusal = std::move(refusal);
  return f;
}

// Refused whatever the value: graphserve cannot do what it asks.
VllmFlag refused(std::string names, A arity, std::string example, std::string refusal) {
  VllmFlag f = noop(std::move(names), arity, std::move(example), "");
  f.refusal = std::move(refusal);
  return f;
}

std::string refuse_max_logprobs(const std::string& v) {
  long long n = parse_human_int(v, "--max-logprobs");
  if (n >= 0 && n <= 20) return "";
  return fmt::format("--max-logprobs {}: the device sampler returns at most 20 logprobs per token", v);
}

constexpr const char* kPython = "it loads Python code, and graphserve runs none";
constexpr const char* kNoMultimodal = "graphserve serves text-only models: no multimodal inputs";
constexpr const char* kLocalOnly = "models are read from local directories; nothing is downloaded";

std::vector<VllmFlag> make_table() {
  std::vector<VllmFlag> t = {
      // Front end (HTTP server).
      noop("--uvicorn-log-level", A::Value, "info", "no uvicorn: --log-level sets the log level"),
      noop("--disable-uvicorn-access-log", A::Switch, "", "no uvicorn: --disable-log-requests drops the access log"),
      noop("--allow-credentials", A::Switch, "", "no CORS headers are sent"),
      noop("--allowed-origins", A::Value, "[\"*\"]", "no CORS headers are sent"),
      noop("--allowed-methods", A::Value, "[\"*\"]", "no CORS headers are sent"),
      noop("--allowed-headers", A::Value, "[\"*\"]", "no CORS headers are sent"),
      refused("--ssl-keyfile", A::Value, "key.pem", "TLS is not served: put a TLS-terminating proxy in front"),
      refused("--ssl-certfile", A::Value, "cert.pem", "TLS is not served: put a TLS-terminating proxy in front"),
      refused("--ssl-ca-certs", A::Value, "ca.pem", "TLS is not served: put a TLS-terminating proxy in front"),
      noop("--ssl-cert-reqs", A::Value, "0", "TLS is not served"),
      noop("--enable-ssl-refresh", A::Switch, "", "TLS is not served"),
      noop("--root-path", A::Value, "/", "routes are served at their own paths (a proxy may add a prefix)"),
      refused("--middleware", A::Values, "m.mod", kPython),
      refused("--return-tokens-as-token-ids", A::Switch, "", "tokens are always returned as text"),
      noop("--disable-frontend-multiprocessing", A::Switch, "", "the HTTP front end is threads of one process"),
      noop("--enable-request-id-headers", A::Switch, "", "no X-Request-Id header is sent"),
      refused("--tool-parser-plugin", A::Value, "plugin.py", kPython),
      noop("--tool-server", A::Value, "demo", "no built-in tool servers"),
      noop("--exclude-tools-when-tool-choice-none", A::Switch, "", "tools stay in the prompt with tool_choice none"),
      noop("--log-config-file", A::Value, "log.json", "logging is spdlog's: --log-level sets it"),
      noop("--max-log-len", A::Value, "100", "prompts are never logged"),
      noop("--disable-fastapi-docs", A::Switch, "", "no /docs pages are served"),
      noop("--enable-prompt-tokens-details", A::Switch, "", "usage has no prompt_tokens_details"),
      noop("--enable-server-load-tracking", A::Switch, "", "/metrics already reports the load"),
      noop("--enable-force-include-usage", A::Switch, "", "usage follows each request's stream_options"),
      noop("--enable-tokenizer-info-endpoint", A::Switch, "", "no /tokenizer_info route"),
      noop("--enable-log-outputs", A::Switch, "", "outputs are never logged"),
      noop("--h11-max-incomplete-event-size", A::Value, "4194304", "no h11: --max-header-bytes bounds the headers"),
      noop("--h11-max-header-count", A::Value, "256", "no h11: --max-header-bytes bounds the headers"),
      noop("--log-error-stack", A::Switch, "", "errors are logged as one line"),
      noop("--api-server-count", A::Value, "1", "one HTTP front end; --io-threads and --http-threads size it"),
      refused("--headless", A::Switch, "", "run `graphserve worker` on the other nodes instead"),
      refused("--config", A::Value, "config.yaml",
              "YAML config files are not read: pass the flags on the command line"),
      noop("--chat-template-content-format", A::Value, "auto", "content parts are joined into text"),
      only("--response-role", {"assistant"}, "chat responses always carry the role 'assistant'", ""),
      noop("--disable-log-requests-details", A::Switch, "", "requests are logged as one access line"),
      // Model.
      only("--tokenizer-mode", {"auto", "hf", "slow"}, "only Hugging Face tokenizer.json tokenizers are read",
           "tokenizer.json is read by graphserve's own tokenizer"),
      noop("--trust-remote-code", A::Switch, "", "no Python code is ever run: architectures are built in"),
      refused("--hf-config-path", A::Value, "dir", "config.json is read from the --model directory"),
      noop("--allowed-local-media-path", A::Value, "/data", kNoMultimodal),
      noop("--allowed-media-domains", A::Values, "example.com", kNoMultimodal),
      noop("--revision", A::Value, "main", kLocalOnly),
      noop("--code-revision", A::Value, "main", kLocalOnly),
      noop("--tokenizer-revision", A::Value, "main", kLocalOnly),
      noop("--hf-token", A::Value, "hf_x", kLocalOnly),
      noop("--download-dir", A::Value, "/tmp/hf", kLocalOnly),
      refused("--rope-scaling", A::Value, "{}", "config overrides are not applied: edit the model's config.json"),
      refused("--rope-theta", A::Value, "10000", "config overrides are not applied: edit the model's config.json"),
      refused("--hf-overrides", A::Value, "{}", "config overrides are not applied: edit the model's config.json"),
      noop("--max-seq-len-to-capture", A::Value, "8192", "graph sizes come from --cuda-graph-sizes / -cc"),
      only("--logprobs-mode", {"raw_logprobs"}, "logprobs are those of the raw model output", ""),
      noop("--disable-sliding-window", A::Switch, "", "attention follows the model's config"),
      refused("--enable-prompt-embeds", A::Switch, "", "prompts are text or token ids"),
      only("--config-format", {"auto", "hf"}, "only Hugging Face config.json is read", ""),
      refused("--logits-processor-pattern", A::Value, ".*", kPython),
      refused("--logits-processors", A::Values, "m.LP", kPython),
      refused("--override-generation-config", A::Value, "{}",
              "pass a directory with a generation_config.json as --generation-config DIR"),
      noop("--enable-sleep-mode", A::Switch, "", "no sleep / wake_up routes"),
      only("--model-impl", {"auto", "vllm"}, "architectures are graphserve's own (no transformers backend)", ""),
      refused("--override-attention-dtype", A::Value, "bfloat16", "attention runs in the compute dtype (--dtype)"),
      refused("--io-processor-plugin", A::Value, "p", kPython),
      // Loading.
      noop("--model-loader-extra-config", A::Value, "{}", "the safetensors loader has no options"),
      noop("--ignore-patterns", A::Values, "*.pt", "only *.safetensors files are read"),
      noop("--use-tqdm-on-load", A::Switch, "", "load progress is logged"),
      noop("--pt-load-map-location", A::Value, "cpu", "only *.safetensors files are read"),
      noop("--safetensors-load-strategy", A::Value, "lazy", "safetensors files are memory-mapped"),
      // Parallelism.
      only("--pipeline-parallel-size,-pp", {"1"}, "pipeline parallelism is not implemented: use --tensor-parallel-size",
           ""),
      only("--data-parallel-size,-dp", {"1"},
           "data parallelism is not implemented: run one server per GPU group behind a load balancer", ""),
      only("--decode-context-parallel-size,-dcp", {"1"}, "decode context parallelism is not implemented", ""),
      noop("--data-parallel-rank,-dpn", A::Value, "0", "one data-parallel rank"),
      noop("--data-parallel-start-rank,-dpr", A::Value, "0", "one data-parallel rank"),
      noop("--data-parallel-size-local,-dpl", A::Value, "1", "one data-parallel rank"),
      noop("--data-parallel-address,-dpa", A::Value, "127.0.0.1", "one data-parallel rank"),
      noop("--data-parallel-rpc-port,-dpp", A::Value, "13345", "one data-parallel rank"),
      noop("--data-parallel-backend,-dpb", A::Value, "mp", "one data-parallel rank"),
      noop("--data-parallel-hybrid-lb", A::Switch, "", "one data-parallel rank"),
      noop("--data-parallel-external-lb", A::Switch, "", "one data-parallel rank"),
      noop("--enable-eplb", A::Switch, "", "no expert load balancing"),
      noop("--eplb-config", A::Value, "{}", "no expert load balancing"),
      noop("--max-parallel-loading-workers", A::Value, "2", "each rank reads its own shard"),
      noop("--ray-workers-use-nsight", A::Switch, "", "no Ray: workers are graphserve processes"),
      refused("--worker-cls", A::Value, "m.W", kPython),
      refused("--worker-extension-cls", A::Value, "m.W", kPython),
      noop("--enable-dbo", A::Switch, "", "no dual-batch overlap"),
      // KV cache.
      noop("--swap-space", A::Value, "4", "no CPU swap: a preempted request recomputes its KV cache"),
      refused("--num-gpu-blocks-override", A::Value, "1024",
              "size the KV cache with --kv-cache-memory-bytes or --gpu-memory-utilization"),
      noop("--prefix-caching-hash-algo", A::Value, "sha256", "prefix blocks are keyed by graphserve's own hash"),
      only("--cpu-offload-gb", {"0"}, "weights are never offloaded to the CPU", ""),
      noop("--calculate-kv-scales", A::Switch, "",
           "FP8 KV-cache scales come from the checkpoint (else 1.0), never from a batch"),
      noop("--kv-sharing-fast-prefill", A::Switch, "", "no cross-layer KV sharing"),
      noop("--mamba-cache-dtype", A::Value, "auto", "no Mamba models"),
      refused("--kv-offloading-size", A::Value, "8", "the KV cache is never offloaded"),
      // Multimodal.
      noop("--limit-mm-per-prompt", A::Value, "{}", kNoMultimodal),
      noop("--mm-processor-kwargs", A::Value, "{}", kNoMultimodal),
      noop("--mm-processor-cache-gb", A::Value, "4", kNoMultimodal),
      noop("--disable-mm-preprocessor-cache", A::Switch, "", kNoMultimodal),
      noop("--interleave-mm-strings", A::Switch, "", kNoMultimodal),
      noop("--skip-mm-profiling", A::Switch, "", kNoMultimodal),
      noop("--media-io-kwargs", A::Value, "{}", kNoMultimodal),
      noop("--mm-encoder-tp-mode", A::Value, "weights", kNoMultimodal),
      // LoRA.
      noop("--enable-lora-bias", A::Switch, "", "adapters' biases are not applied"),
      noop("--lora-extra-vocab-size", A::Value, "0", "adapters add no tokens"),
      noop("--lora-dtype", A::Value, "auto", "adapters run in the compute dtype"),
      noop("--fully-sharded-loras", A::Switch, "",
           "adapters are sharded as vLLM's default (lora_B split on column-parallel projections, lora_A on "
           "row-parallel ones): the same sums in another order"),
      noop("--default-mm-loras", A::Value, "{}", kNoMultimodal),
      // Observability.
      noop("--show-hidden-metrics-for-version", A::Value, "0.10", "every metric is always shown"),
      noop("--otlp-traces-endpoint", A::Value, "http://localhost:4317", "no OpenTelemetry traces"),
      noop("--collect-detailed-traces", A::Value, "all", "no OpenTelemetry traces"),
      // Scheduler.
      noop("--enable-chunked-prefill", A::Switch, "",
           "prompts longer than --max-num-batched-tokens are always prefilled in chunks"),
      noop("--max-num-partial-prefills", A::Value, "1", "prefill chunks are scheduled oldest first"),
      noop("--max-long-partial-prefills", A::Value, "1", "prefill chunks are scheduled oldest first"),
      noop("--long-prefill-token-threshold", A::Value, "0", "prefill chunks are scheduled oldest first"),
      noop("--num-lookahead-slots", A::Value, "0", "speculative slots come from --speculative-config"),
      only("--scheduling-policy", {"fcfs"}, "only first-come-first-served scheduling is implemented", ""),
      noop("--disable-chunked-mm-input", A::Switch, "", kNoMultimodal),
      refused("--scheduler-cls", A::Value, "m.S", kPython),
      noop("--disable-hybrid-kv-cache-manager", A::Switch, "", "one KV cache manager for every layer"),
      noop("--async-scheduling", A::Switch, "", "the next step is scheduled while the device runs this one"),
      noop("--num-scheduler-steps", A::Value, "1", "one scheduling step per model step"),
      noop("--use-v2-block-manager", A::Switch, "", "one block manager"),
      noop("--disable-async-output-proc", A::Switch, "", "outputs are processed on the engine thread"),
      // Configs.
      refused("--kv-transfer-config", A::Value, "{}", "disaggregated prefill (KV transfer) is not implemented"),
      noop("--kv-events-config", A::Value, "{}", "no KV cache events are published"),
      noop("--additional-config", A::Value, "{}", "no platform plugins"),
      noop("--structured-outputs-config", A::Value, "{}", "structured output backends are graphserve's own"),
      noop("--guided-decoding-backend", A::Value, "auto", "structured output backends are graphserve's own"),
      noop("--enable-reasoning", A::Switch, "", "reasoning is split from the content by --reasoning-parser"),
  };
  t.push_back(noop("--max-logprobs", A::Value, "20", "requests may ask for up to 20 logprobs per token"));
  t.back().refuse = refuse_max_logprobs;
  return t;
}

const char* arity_label(FlagArity a) {
  switch (a) {
    case FlagArity::Switch: return "switch (--no-X too)";
    case FlagArity::Values: return "values";
    default: return "value";
  }
}

std::string status_of(const VllmFlag& f) {
  if (f.is_noop()) return "no-op";
  if (!f.accepted.empty()) return fmt::format("accepted: {}", fmt::join(f.accepted, ", "));
  if (f.refuse) return "some values";
  return "refused";
}

}  // namespace

std::string VllmFlag::long_name() const {
  const auto comma = names.find(',');
  return comma == std::string::npos ? names : names.substr(0, comma);
}

std::string VllmFlag::check(const std::string& value) const {
  if (refuse) return refuse(value);
  if (!refusal.empty() && accepted.empty()) return fmt::format("{}: {}", long_name(), refusal);
  if (accepted.empty() || std::find(accepted.begin(), accepted.end(), value) != accepted.end()) return "";
  return fmt::format("{} {}: {} (accepted: {})", long_name(), value, refusal, fmt::join(accepted, ", "));
}

const std::vector<VllmFlag>& vllm_flag_table() {
  static const std::vector<VllmFlag> table = make_table();
  return table;
}

std::string vllm_flag_table_markdown() {
  std::string out = "| vLLM flag | kind | status | in graphserve |\n|---|---|---|---|\n";
  for (const VllmFlag& f : vllm_flag_table()) {
    std::string why = f.note.empty() ? f.refusal : f.note;
    if (!f.note.empty() && !f.refusal.empty()) why += "; other values: " + f.refusal;
    out += fmt::format("| `{}` | {} | {} | {} |\n", f.names, arity_label(f.arity), status_of(f), why);
  }
  return out;
}

std::string vllm_flag_table_json() {
  nlohmann::json rows = nlohmann::json::array();
  for (const VllmFlag& f : vllm_flag_table()) {
    const bool honoured_example = f.check(f.example).empty();
    rows.push_back({{"flag", f.long_name()},
                    {"names", f.names},
                    {"switch", f.arity == FlagArity::Switch},
                    {"example", f.example},
                    {"example_accepted", honoured_example},
                    {"status", status_of(f)}});
  }
  return rows.dump(1);
}

}  // namespace gs
