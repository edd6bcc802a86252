// `vllm serve` launch lines run unchanged: every flag of the table (graphserve info --vllm-flags)
// is accepted by serve with its example value (a no-op logs what it does here), values graphserve
// cannot honour are refused with the reason, vLLM's spellings (-tp, underscores, 32k / 32K,
// --dtype half) resolve as in vLLM, a misspelled flag gets a suggestion, docs/VLLM_FLAGS.md
// carries the table, and a real server started with such a line answers under the --model name.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "../server/http_client.h"
#include "test_paths.h"

namespace gs {
namespace {

using nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out;
};

CliResult graphserve(const std::string& args) {
  const std::string cmd = "timeout 60 " + test::graphserve_exe().string() + " " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

// serve --dry-run with `flags`: the exit code, the log and (on success) the resolved settings.
CliResult dry_run(const std::string& flags) { return graphserve("--log-level info serve --dry-run " + flags); }

json resolved(const CliResult& r) {
  const size_t brace = r.out.rfind("\n{\n") != std::string::npos ? r.out.rfind("\n{\n") + 1 : r.out.find("{\n");
  return brace == std::string::npos ? json() : json::parse(r.out.substr(brace), nullptr, false);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

TEST(VllmFlags, EveryFlagOfTheTableIsAcceptedOrRefusedWithItsReason) {
  const CliResult table = graphserve("info --vllm-flags json");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  const json rows = json::parse(table.out);
  ASSERT_GT(rows.size(), 100u);
  for (const json& row : rows) {
    const std::string flag = row["flag"];
    SCOPED_TRACE(flag);
    const std::string arg = row["switch"] ? flag : flag + " " + quoted(row["example"]);
    const CliResult r = dry_run(arg);
    if (row["example_accepted"]) {
      EXPECT_EQ(r.exit_code, 0) << r.out;
      EXPECT_NE(r.out.find(flag), std::string::npos) << "no log line names the flag\n" << r.out;
      EXPECT_NE(r.out.find("accepted"), std::string::npos) << r.out;
      if (row["switch"]) {  // the negative form too
        const CliResult neg = dry_run("--no-" + flag.substr(2));
        EXPECT_EQ(neg.exit_code, 0) << neg.out;
      }
    } else {
      EXPECT_EQ(r.exit_code, 1) << r.out;
      EXPECT_NE(r.out.find("error: " + flag), std::string::npos) << r.out;
    }
  }
}

TEST(VllmFlags, ValuesThatCannotBeHonouredAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-cache-dtype fp8_e5m2", "the FP8 KV cache is e4m3"},
      {"-pp 2", "pipeline parallelism"},
      {"--data-parallel-size 2", "data parallelism"},
      {"--quantization awq", "--quantization 'awq' is not supported (only fp8"},
      {"-q gptq", "--quantization 'gptq' is not supported (only fp8"},
      {"--max-logprobs 50", "at most 20"},
      {"--runner pooling -tp 2", "--runner pooling with --tensor-parallel-size 2"},
      {"--convert classify", "only embed"},
      {"--pooler-config '{\"pooling_type\": \"CLS\"}'", "pooling_type cls is not supported"},
      {"--max-model-len 1.5K", "decimals are not allowed"},
      {"--max-model-len lots", "not an integer"},
      {"--scheduling-policy priority", "first-come-first-served"},
  };
  for (const auto& [flags, reason] : cases) {
    SCOPED_TRACE(flags);
    const CliResult r = dry_run(flags);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(reason), std::string::npos) << r.out;
  }
}

TEST(VllmFlags, VllmSpellingsResolveAsInVllm) {
  struct Case {
    const char* flags;
    const char* key;
    json value;
  };
  const Case cases[] = {
      {"--max-model-len 32k", "max_model_len", 32000},
      {"--max-model-len 32K", "max_model_len", 32768},
      {"--max-model-len 25.6k", "max_model_len", 25600},
      {"--max_model_len 4096", "max_model_len", 4096},
      {"--max-model-len auto", "max_model_len", 0},
      {"--max-num-batched-tokens 8K", "max_num_batched_tokens", 8192},
      {"-tp 2", "tensor_parallel_size", 2},
      {"-tp=2", "tensor_parallel_size", 2},
      {"-tp 2 -ep", "enable_expert_parallel", true},
      {"--enable-expert-parallel", "enable_expert_parallel", true},
      {"--enable-expert-parallel --no-enable-expert-parallel", "enable_expert_parallel", false},
      {"-tp 2", "enable_expert_parallel", false},
      {"--dtype half", "dtype", "float16"},
      {"--dtype float", "dtype", "float32"},
      {"--dtype bfloat16", "dtype", "bfloat16"},
      {"--kv-cache-memory-bytes 1G", "kv_cache_memory_bytes", 1 << 30},
      {"--cuda-graph-sizes 16", "cudagraph_capture_sizes", json::array({1, 2, 4, 8, 16})},
      {"--cuda-graph-sizes 1 3 5", "cudagraph_capture_sizes", json::array({1, 3, 5})},
      {"--no-enable-log-requests", "access_log", false},
      {"--disable-log-requests --enable-log-requests", "access_log", true},
      {"--enable-prefix-caching", "enable_prefix_caching", true},
      {"--no-enable-prefix-caching", "enable_prefix_caching", false},
      {"--runner pooling", "runner", "pooling"},
      {"--convert embed", "runner", "pooling"},
      {"--task embed", "runner", "pooling"},
      {"--runner generate", "runner", "generate"},
      {"--model /some/model", "served_model_names", json::array({"/some/model"})},
      {"/some/model --served-model-name a b", "served_model_names", json::array({"a", "b"})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    const CliResult r = dry_run(c.flags);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(resolved(r)[c.key], c.value) << r.out;
  }
}

TEST(VllmFlags, AMisspelledFlagGetsASuggestion) {
  const CliResult r = dry_run("--max-model-length 100");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("did you mean --max-model-len?"), std::string::npos) << r.out;
  const CliResult r2 = dry_run("--trust-remote-cod");
  EXPECT_NE(r2.out.find("did you mean --trust-remote-code?"), std::string::npos) << r2.out;
}

TEST(VllmFlags, TheDocsCarryTheTable) {
  const CliResult table = graphserve("info --vllm-flags md");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  std::ifstream in(test::source_dir() / "docs" / "VLLM_FLAGS.md");
  ASSERT_TRUE(in.good());
  std::stringstream docs;
  docs << in.rdbuf();
  std::istringstream lines(table.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) {
      EXPECT_NE(docs.str().find(line), std::string::npos) << "docs/VLLM_FLAGS.md lacks: " << line;
    }
}

// A vLLM launch line (no-op flags, -tp, a size suffix) starts a real server on stories260K: it
// answers under the --model string, /version and /ping work, and no log line has a [stderr] tag.
TEST(VllmFlags, AVllmLaunchLineServes) {
  const std::string model = test::stories260k_dir().string();
  const int port = 18000 + static_cast<int>(::getpid() % 2000);
  const std::string log = (test::binary_dir() / "vllm_flags_serve.log").string();
  const std::string cmd = "timeout 60 " + test::graphserve_exe().string() + " --log-level info serve " + model +
                          " --device cpu --enforce-eager --port " + std::to_string(port) +
                          " --trust-remote-code --swap-space 4 -tp 1 --max-model-len 0.5k --kv-cache-dtype auto "
                          "--enable-chunked-prefill --uvicorn-log-level warning --disable-log-stats > " +
                          log + " 2>&1 & echo $!";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  int pid = 0;
  ASSERT_EQ(fscanf(p, "%d", &pid), 1);
  pclose(p);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = test::get(port, "/health").status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (up) {
    EXPECT_EQ(test::get(port, "/ping").status, 200);
    EXPECT_EQ(test::get(port, "/version").status, 200);
    auto r = test::post(port, "/v1/completions",
                        json{{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", 8}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    auto card = test::get(port, "/v1/models/" + model);
    EXPECT_EQ(card.status, 200) << card.body;
    EXPECT_EQ(r.json()["choices"][0]["text"].is_string(), true);
  }
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  ASSERT_TRUE(up) << ss.str();
  EXPECT_EQ(ss.str().find("[stderr]"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("--trust-remote-code: accepted, no effect: no Python code is ever run"), std::string::npos)
      << ss.str();
  EXPECT_NE(ss.str().find("max_model_len 500"), std::string::npos) << ss.str();
}

TEST(VllmFlags, APortInUseFailsBeforeTheModelLoads) {
  httplib::Server blocker;  // holds a port the system chose free, so no other test's port can collide
  const int port = blocker.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const CliResult r =
      graphserve("serve --load-format dummy --preset llama3.2-1b --device cpu --port " + std::to_string(port));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("another server runs there"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loading weights"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gs
