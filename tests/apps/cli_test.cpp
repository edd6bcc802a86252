// The graphserve command line, as a user meets it: real runs on stories260K, and bad input that
// must end in one clear error line and exit code 1 (never a crash, a hang or a signal).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "golden.h"
#include "test_paths.h"

namespace gs {
namespace {

struct CliRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;     // stdout and stderr together
};

CliRun graphserve(const std::string& args) {
  const std::string cmd = "timeout 120 " + test::graphserve_exe().string() + " " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

std::string stories() { return "--model " + test::stories260k_dir().string() + " --device cpu"; }

TEST(Cli, GenerateOnStories260KPrintsTheGoldenGreedyText) {
  const auto golden = test::stories_golden("short");
  const CliRun r = graphserve("--log-level warn generate " + stories() +
                              " --prompt 'Once upon a time' --temperature 0 --max-tokens 64 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(golden["output_text"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
}

// n-gram speculation through the CLI: the same golden text, and the acceptance summary.
TEST(Cli, GenerateWithSpeculativeConfigPrintsTheGoldenTextAndAcceptance) {
  const auto golden = test::stories_golden("short");
  const CliRun r = graphserve(
      "--log-level warn generate " + stories() +
      " --prompt 'Once upon a time' --temperature 0 --max-tokens 64 --ignore-eos --speculative-config "
      "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_max\": 3, \"prompt_lookup_min\": 1}'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(golden["output_text"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speculative decoding: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean acceptance length"), std::string::npos) << r.out;
}

TEST(Cli, InfoListsThePresets) {
  const CliRun r = graphserve("info --presets");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* p : {"smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b", "llama3.1-8b"})
    EXPECT_NE(r.out.find(p), std::string::npos) << p << "\n" << r.out;
}

// A preset's shape: deepseek-v2-lite's 15.7B parameters, 2.66B active, and its KV cache of one
// 576-value latent row a token and layer over 27 layers: 31104 bytes in bf16, 15552 in fp8.
TEST(Cli, InfoGivesActiveParametersAndKvBytes) {
  const CliRun r = graphserve("info --preset deepseek-v2-lite");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want : {"parameters: 15706484224", "active parameters per token: 2661150208",
                           "kv cache per token: 31104 bytes bf16, 15552 bytes fp8"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

// Each bad input: exit code 1 and a message naming the problem.
struct BadInput {
  const char* name;
  std::string args;
  const char* expected;  // a fragment the error must contain
};

TEST(Cli, BadInputGivesAClearErrorAndExitCodeOne) {
  const std::string long_prompt(4000, 'a');  // > 512 tokens of context once tokenized byte by byte
  const BadInput cases[] = {
      {"empty prompt", "generate " + stories() + " --prompt ''", "empty"},
      {"prompt longer than the context", "generate " + stories() + " --prompt '" + long_prompt + "'", "max_model_len"},
      {"bad model path", "generate --model /nonexistent/model --prompt hi", "/nonexistent/model"},
      {"bad temperature", "generate " + stories() + " --prompt hi --temperature -1", "temperature"},
      {"bad top_p", "generate " + stories() + " --prompt hi --top-p 1.5", "top_p"},
      {"bad max_tokens", "generate " + stories() + " --prompt hi --max-tokens 0", "max_tokens"},
      {"unknown preset", "generate --load-format dummy --preset nope --prompt hi", "nope"},
      {"unknown graph mode", "generate " + stories() + " --prompt hi -cc.cudagraph_mode=FAST", "FULL_AND_PIECEWISE"},
      {"unknown compilation key", "generate " + stories() + " --prompt hi --compilation-config '{\"nope\": 1}'",
       "nope"},
      {"unknown speculative method",
       "generate " + stories() +
           " --prompt hi --speculative-config '{\"method\": \"medusa\", \"num_speculative_tokens\": 2}'",
       "ngram, draft_model"},
      {"draft of another vocabulary",
       "generate " + stories() +
           " --prompt hi --speculative-config '{\"method\": \"draft_model\", \"model\": \"smollm2-135m\", "
           "\"num_speculative_tokens\": 2}'",
       "tokenizer vocabulary"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    const CliRun r = graphserve(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace gs
