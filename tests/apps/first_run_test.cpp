// The README's first run: `bash scripts/bootstrap.sh run` serves the built-in default (random
// weights, the built-in tokenizer and chat template) on 127.0.0.1:8000; a first completion must
// show text and chat must answer. Here the same `graphserve serve` with no model, on a free port.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "../server/http_client.h"
#include "test_paths.h"

namespace gs {
namespace {

using nlohmann::json;

bool visible(const std::string& s) {
  for (unsigned char c : s)
    if (c > ' ' && c != 0x7F) return true;
  return false;
}

TEST(FirstRun, TheDefaultModelAnswersACompletionWithTextAndAChat) {
  const int port = 20000 + static_cast<int>(::getpid() % 2000);
  const std::string cmd = "timeout 120 " + test::graphserve_exe().string() +
                          " serve --device cpu --enforce-eager --port " + std::to_string(port) +
                          " > /dev/null 2>&1 & echo $!";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  int pid = 0;
  ASSERT_EQ(fscanf(p, "%d", &pid), 1);
  pclose(p);
  bool up = false;
  for (int i = 0; i < 1200 && !up; ++i) {
    up = test::get(port, "/health").status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (up) {
    const std::string model = test::get(port, "/v1/models").json()["data"][0]["id"];
    auto c = test::post(port, "/v1/completions", json{{"model", model}, {"prompt", "Hello"}, {"max_tokens", 8}}.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_TRUE(visible(c.json()["choices"][0]["text"].get<std::string>())) << c.body;
    auto chat = test::post(
        port, "/v1/chat/completions",
        json{{"model", model}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 8}}
            .dump());
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_TRUE(visible(chat.json()["choices"][0]["message"]["content"].get<std::string>())) << chat.body;
  }
  ::kill(pid, SIGTERM);
  ASSERT_TRUE(up) << "graphserve serve (the built-in default) did not answer /health within 120 s";
}

}  // namespace
}  // namespace gs
