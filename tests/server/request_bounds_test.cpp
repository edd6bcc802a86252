// Per-request bounds (server/request_bounds.h) on a real server (stories260K on the CPU): a prompt
// too long in bytes is refused before it is tokenized, stop strings have a total cap, a reply's
// logprob entries are capped; and the amplification requests of issue 34 (15 MB prompts, 15 MB
// stop strings with n 16, a 13 MB chat body, 64 echoed prompts with 20 logprobs) stay under a
// stated peak-RSS bound, with RSS back within 10% of its start once they are answered.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <sstream>

#include "http_client.h"
#include "real_server.h"
#include "server/request_bounds.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

using nlohmann::json;

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// VmHWM (peak RSS) since the last reset_peak(); -1 when the kernel cannot reset it.
int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}
bool reset_peak() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY);
  const bool ok = fd >= 0 && ::write(fd, "5", 1) == 1;
  if (fd >= 0) ::close(fd);
  return ok;
}

// Under AddressSanitizer freed memory waits in a quarantine and every block carries redzones, so RSS
// measures the sanitizer's allocator; the release build's run of this test checks the bounds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssIsGraphserves = false;
#else
constexpr bool kRssIsGraphserves = true;
#endif

struct Bounds : ::testing::Test {
  static test::RealServer& server() {
    static test::RealServer s;
    return s;
  }
  int port() { return server().port(); }
  const ServedModel& model() { return server().engine.model(); }
};

TEST_F(Bounds, PromptBytesRefusedBeforeTokenizing) {
  const size_t bound = max_prompt_bytes(model());
  ASSERT_GT(bound, 0u);
  ASSERT_LT(bound, 1u << 20);  // stories260K: 512 tokens of at most a few bytes each
  const std::string too_long(bound + 1, 'a');
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/v1/completions", {{"prompt", too_long}, {"max_tokens", 1}}},
           {"/v1/completions", {{"prompt", {"a", too_long}}, {"max_tokens", 1}}},
           {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", too_long}}}}}},
           {"/tokenize", {{"prompt", too_long}}}}) {
    const auto r = test::post(port(), path, body.dump());
    EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("bytes"), std::string::npos) << r.body.substr(0, 300);
  }
  // Just under the bound it is tokenized and refused by its token count, as before.
  const auto r = test::post(port(), "/v1/completions", json{{"prompt", std::string(bound, 'a')}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("tokens"), std::string::npos) << r.body.substr(0, 300);
}

// A prompt within the byte bound but over the context is refused once its tokens pass the
// context: the tokenizer stops there, and the count it reached is what the error reports.
TEST_F(Bounds, TokenizingStopsPastTheContext) {
  std::string text;
  while (text.size() + 20 < max_prompt_bytes(model())) text += "Once upon a time. ";
  const int ctx = model().max_model_len;
  const std::string chat_text = text.substr(0, text.size() - 64);  // room for the template
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/v1/completions", {{"prompt", text}, {"max_tokens", 1}}},
           {"/v1/completions", {{"prompt", {"a", text}}, {"max_tokens", 1}}},
           {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", chat_text}}}}}}}) {
    const auto r = test::post(port(), path, body.dump());
    ASSERT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 300);
    EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
    const std::string msg = r.json()["error"]["message"];
    const std::string lead = "the prompt has at least ";
    ASSERT_EQ(msg.rfind(lead, 0), 0u) << msg;
    const int n = std::stoi(msg.substr(lead.size()));
    EXPECT_GE(n, ctx) << msg;
    EXPECT_LE(n, ctx + 64) << "tokenizing went on past the context: " << msg;
  }
  EXPECT_GT(Tokenizer::from_dir(test::stories260k_dir()).encode(text).size(), size_t(ctx) * 4) << "far over";
}

TEST_F(Bounds, StopStringsTotalCap) {
  const std::vector<std::string> fits(16, std::string(kMaxStopBytes / 16, 'z'));
  EXPECT_EQ(
      test::post(port(), "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}, {"stop", fits}}.dump()).status,
      200);
  const auto r =
      test::post(port(), "/v1/completions",
                 json{{"prompt", "Once"}, {"max_tokens", 2}, {"stop", std::string(kMaxStopBytes + 1, 'z')}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("stop"), std::string::npos) << r.body;
}

json echoed_prompts(int prompts, int tokens, int logprobs) {
  std::vector<std::vector<int>> p(size_t(prompts), std::vector<int>(size_t(tokens), 300));
  return {{"prompt", p}, {"echo", true}, {"logprobs", logprobs}, {"max_tokens", 1}};
}

TEST_F(Bounds, LogprobEntriesPerReplyCapped) {
  const auto big = test::post(port(), "/v1/completions", echoed_prompts(64, 500, 20).dump());
  EXPECT_EQ(big.status, 400) << big.body.substr(0, 300);
  EXPECT_NE(big.body.find("logprob entries"), std::string::npos) << big.body;
  json streamed = echoed_prompts(1, 100, 20);  // streamed generation does not count, the echo does
  streamed["stream"] = true;
  streamed["max_tokens"] = 400;
  EXPECT_EQ(test::post_stream(port(), "/v1/completions", streamed.dump()).status, 200);
  const auto ok = test::post(port(), "/v1/completions", echoed_prompts(64, 100, 5).dump());  // 38,784 entries
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 300);
  EXPECT_EQ(ok.json()["choices"].size(), 64u);
}

// The amplification set, 8 requests at once. Bound: the bodies' bytes x 4 + 256 MB (each body is
// held as received, as JSON, and once more as a prompt or stop list while it is checked).
TEST_F(Bounds, AmplificationSetHoldsMemoryAndGivesItBack) {
  const std::string prompt_15mb = json{{"prompt", std::string(15u << 20, 'a')}, {"max_tokens", 1}}.dump();
  const std::string stop_15mb = json{{"prompt", "Once"}, {"n", 16}, {"stop", std::string(15u << 20, 'z')}}.dump();
  const std::string chat_13mb =
      json{{"messages", {{{"role", "user"}, {"content", std::string(13u << 20, 'b')}}}}}.dump();
  const std::string logprobs = echoed_prompts(64, 500, 20).dump();
  const std::string allowed = echoed_prompts(64, 100, 5).dump();
  const std::vector<std::pair<std::string, const std::string*>> set = {
      {"/v1/completions", &prompt_15mb}, {"/v1/completions", &prompt_15mb},    {"/v1/completions", &stop_15mb},
      {"/v1/completions", &stop_15mb},   {"/v1/chat/completions", &chat_13mb}, {"/v1/completions", &logprobs},
      {"/v1/completions", &logprobs},    {"/v1/completions", &allowed}};
  size_t body_bytes = 0;
  for (const auto& [path, body] : set) body_bytes += body->size();

  ASSERT_EQ(test::post(port(), "/v1/completions", allowed).status, 200);  // warm: arenas, threads
  const int64_t start = rss_bytes();
  const bool peak_known = reset_peak();
  std::vector<std::future<test::HttpResult>> replies;
  for (const auto& [path, body] : set)
    replies.push_back(std::async(std::launch::async, [&, p = path, b = body] { return test::post(port(), p, *b); }));
  for (size_t i = 0; i < set.size(); ++i) {
    const auto r = replies[i].get();
    EXPECT_EQ(r.status, i + 1 == set.size() ? 200 : 400) << i << ": " << r.body.substr(0, 200);
  }
  ASSERT_EQ(server().server->in_flight(), 0);
  if (!kRssIsGraphserves) GTEST_SKIP() << "RSS under AddressSanitizer is the sanitizer's allocator";
  const int64_t after = rss_bytes(), peak = peak_rss_bytes();
  const int64_t bound = int64_t(body_bytes) * 4 + (int64_t(256) << 20);
  std::printf("RSS start %.1f MB, peak %.1f MB (bound: start + %.1f MB), after %.1f MB\n", start / 1e6,
              peak_known ? peak / 1e6 : -1.0, bound / 1e6, after / 1e6);
  if (peak_known) {
    EXPECT_LT(peak - start, bound);
  }
  EXPECT_LT(after, start + start / 10) << "RSS did not come back: start " << start << ", after " << after;
}

}  // namespace
}  // namespace gs
