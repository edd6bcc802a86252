// LoRA through the HTTP server (stories260K on the CPU, a random PEFT adapter): /v1/models lists
// the adapter with its base as parent, and a completion naming the adapter in "model" returns
// the adapter's offline text, while the base model's name still gets the base model's.
#include <gtest/gtest.h>

#include "engine/lora_test_util.h"
#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

std::string offline(const EngineConfig& cfg, const std::string& prompt, const std::string& lora) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 12;
  return test::offline_text(cfg, prompt, p, lora);
}

TEST(LoraServer, AdapterByNameInModel) {
  test::TempDir tmp;
  test::write_adapter(tmp.path() / "poet", test::AdapterSpec{.rank = 4, .alpha = 16, .seed = 3});
  EngineConfig cfg = test::stories_config();
  cfg.enable_lora = true;
  cfg.max_lora_rank = 8;
  cfg.lora_modules = {{"poet", (tmp.path() / "poet").string()}};
  EngineLoop engine(std::make_unique<LLMEngine>(cfg), "");
  ServerConfig scfg;
  scfg.port = 0;
  ApiServer server(engine, scfg);
  server.start();

  const json models = test::get(server.port(), "/v1/models").json();
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][1]["id"], "poet");
  EXPECT_EQ(models["data"][1]["parent"], models["data"][0]["id"]);

  auto complete = [&](const std::string& model) {
    auto r = test::post(server.port(), "/v1/completions",
                        json{{"model", model}, {"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 0}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["choices"][0]["text"].get<std::string>();
  };
  const std::string with_adapter = complete("poet"), base = complete("stories260K");
  EXPECT_EQ(with_adapter, offline(cfg, "Once upon", "poet"));
  EXPECT_EQ(base, offline(cfg, "Once upon", ""));
  EXPECT_NE(with_adapter, base);
  const auto unknown = test::post(server.port(), "/v1/completions", R"({"model":"nope","prompt":"x"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;  // vLLM's NotFoundError
  EXPECT_EQ(unknown.json()["error"]["message"], "The model `nope` does not exist.");
  const auto chat = test::post(server.port(), "/v1/chat/completions",
                               R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(chat.status, 404) << chat.body;
  EXPECT_EQ(chat.json()["error"]["type"], "NotFoundError");
  EXPECT_EQ(chat.json()["error"]["code"], 404);
}

}  // namespace
}  // namespace gs
