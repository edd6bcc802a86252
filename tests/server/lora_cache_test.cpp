// `serve --enable-lora --lora-modules a=... b=... c=...` with vLLM's default flags (--max-loras 1,
// --max-cpu-loras = --max-loras): all three are listed and served, the host cache holding one
// adapter and the server reading the others from their directory when a request names them.
// Concurrent and sequential requests of every adapter and of the base model get the text each
// gets alone on an engine that holds every adapter; a dropped adapter whose directory is gone is
// refused with a 400.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "engine/lora_test_util.h"
#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

constexpr int kMaxTokens = 12;

std::string complete(int port, const std::string& model, const std::string& prompt) {
  const auto r = test::post(
      port, "/v1/completions",
      json{{"model", model}, {"prompt", prompt}, {"max_tokens", kMaxTokens}, {"temperature", 0}, {"ignore_eos", true}}
          .dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? r.json()["choices"][0]["text"].get<std::string>() : r.body;
}

TEST(LoraHostCache, DefaultFlagsServeEveryModule) {
  test::TempDir tmp;
  EngineConfig cfg = test::stories_config();
  cfg.enable_lora = true;
  cfg.max_lora_rank = 8;
  const std::vector<std::string> names = {"a", "b", "c"};
  for (size_t i = 0; i < names.size(); ++i) {
    const auto dir = tmp.path() / names[i];
    test::write_adapter(dir, test::AdapterSpec{.rank = 4, .alpha = 8, .seed = uint32_t(60 + i)});
    cfg.lora_modules.emplace_back(names[i], dir.string());
  }
  const std::string prompt = "Once upon a time";
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = kMaxTokens;
  EngineConfig all_held = cfg;
  all_held.max_cpu_loras = 3;
  std::map<std::string, std::string> expected;
  for (const char* m : {"a", "b", "c", ""}) expected[m] = test::offline_text(all_held, prompt, p, m);
  EXPECT_NE(expected["a"], expected["b"]);
  EXPECT_NE(expected["b"], expected["c"]);

  EngineLoop engine(std::make_unique<LLMEngine>(cfg), "");  // the defaults: one adapter in host memory
  ServerConfig scfg;
  scfg.port = 0;
  ApiServer server(engine, scfg);
  server.start();
  const json list = test::get(server.port(), "/v1/models").json();
  std::vector<std::string> ids;
  for (const auto& m : list["data"]) ids.push_back(m["id"]);
  for (const std::string& n : names) EXPECT_NE(std::find(ids.begin(), ids.end(), n), ids.end()) << n;

  std::vector<std::future<std::string>> together;
  const std::vector<std::string> order = {"c", "a", "", "b"};
  for (const std::string& m : order)
    together.push_back(std::async(
        std::launch::async, [&, m] { return complete(server.port(), m.empty() ? engine.model().name : m, prompt); }));
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(together[i].get(), expected[order[i]]) << order[i];
  for (const char* m : {"b", "a", "c", "b"}) EXPECT_EQ(complete(server.port(), m, prompt), expected[m]) << m;

  // "b" is held now; "a" was dropped: once its directory is gone, a request naming it gets a 400
  // naming the directory, and the others go on.
  std::filesystem::remove_all(tmp.path() / "a");
  const auto r = test::post(server.port(), "/v1/completions",
                            json{{"model", "a"}, {"prompt", prompt}, {"max_tokens", kMaxTokens}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("could not be read again from " + (tmp.path() / "a").string()), std::string::npos) << r.body;
  EXPECT_EQ(complete(server.port(), "c", prompt), expected["c"]);
}

}  // namespace
}  // namespace gs
