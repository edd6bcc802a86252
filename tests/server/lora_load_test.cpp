// POST /v1/load_lora_adapter and /v1/unload_lora_adapter on a real server (stories260K on the
// CPU, run-time updating on, the test's directory allowed): each endpoint's errors with vLLM's
// status codes (missing fields, a name in use, unknown names; a path with no adapter and malformed
// adapters get one sentence, the reason goes to the log), /v1/models following the changes, and
// loads and unloads while requests of other adapters and of the base model run: every request
// gets the text it gets alone.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <thread>

#include "engine/lora_test_util.h"
#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;
using test::AdapterSpec;

EngineConfig lora_config() {
  EngineConfig cfg = test::stories_config();
  cfg.enable_lora = true;
  cfg.max_lora_rank = 8;
  cfg.max_loras = 2;
  cfg.max_cpu_loras = 4;
  return cfg;
}

struct LoraServer {
  LoraServer(const EngineConfig& cfg, const std::filesystem::path& root)
      : engine(std::make_unique<LLMEngine>(cfg), "") {
    ServerConfig scfg;
    scfg.port = 0;
    scfg.lora = {.allow_runtime_updating = true, .roots = {root.string()}};
    server = std::make_unique<ApiServer>(engine, scfg);
    server->start();
  }
  test::HttpResult load(const json& body) const {
    return test::post(server->port(), "/v1/load_lora_adapter", body.dump());
  }
  test::HttpResult unload(const json& body) const {
    return test::post(server->port(), "/v1/unload_lora_adapter", body.dump());
  }
  std::vector<std::string> models() const {
    const json list = test::get(server->port(), "/v1/models").json();
    std::vector<std::string> ids;
    for (const auto& m : list["data"]) ids.push_back(m["id"]);
    return ids;
  }
  test::HttpResult complete(const std::string& model, const std::string& prompt, int max_tokens = 16) const {
    return test::post(
        server->port(), "/v1/completions",
        json{{"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}}
            .dump());
  }
  EngineLoop engine;
  std::unique_ptr<ApiServer> server;
};

// The error's message, checked to hold every one of `parts`.
void expect_error(const test::HttpResult& r, int status, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.status, status) << r.body;
  const std::string msg = r.json()["error"]["message"].get<std::string>();
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

// Greedy text of `prompt` with `lora` ("" base) on a fresh engine serving adapter dirs by name.
std::string offline(const std::vector<std::pair<std::string, std::string>>& modules, const std::string& prompt,
                    const std::string& lora, int max_tokens) {
  EngineConfig cfg = lora_config();
  cfg.lora_modules = modules;
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  return test::offline_text(cfg, prompt, p, lora);
}

TEST(LoraEndpoints, ErrorsAndModelsList) {
  test::TempDir tmp;
  const auto good = tmp.path() / "poet";
  test::write_adapter(good, AdapterSpec{.rank = 4, .alpha = 16, .seed = 3});
  LoraServer s(lora_config(), tmp.path());
  const std::string p = good.string();
  const std::string refused = "LoRA adapter 'x' was not loaded: 'lora_path' must name a PEFT adapter directory";

  expect_error(s.load(json::object()), 400, {"Both 'lora_name' and 'lora_path' must be provided."});
  expect_error(s.load({{"lora_name", "x"}}), 400, {"lora_path"});
  EXPECT_EQ(test::post(s.server->port(), "/v1/load_lora_adapter", "{not json").status, 400);
  expect_error(s.load({{"lora_name", "x"}, {"lora_path", (tmp.path() / "none").string()}}), 400, {refused});
  expect_error(s.load({{"lora_name", "stories260K"}, {"lora_path", p}}), 400, {"base model"});

  // Malformed adapters: one sentence, naming neither the file nor what it holds.
  const auto big = tmp.path() / "big";
  test::write_adapter(big, AdapterSpec{.rank = 16, .alpha = 16});
  const auto targets = tmp.path() / "targets";
  test::write_adapter(targets, AdapterSpec{.targets = {"q_proj", "lm_head"}});
  const auto shape = tmp.path() / "shape";
  test::write_adapter(shape, AdapterSpec{.rank = 8, .targets = {"q_proj"}});
  std::ofstream(shape / "adapter_config.json") << json{{"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj"}}};
  const auto missing = tmp.path() / "missing";
  test::write_adapter(missing, AdapterSpec{});
  std::filesystem::remove(missing / "adapter_model.safetensors");
  for (const auto& dir : {big, targets, shape, missing}) {
    const auto r = s.load({{"lora_name", "x"}, {"lora_path", dir.string()}});
    expect_error(r, 400, {refused});
    for (const char* leak : {"adapter_config", "safetensors", "lm_head", "16", "expected"})
      EXPECT_EQ(r.body.find(leak), std::string::npos) << leak << " in " << r.body;
  }
  EXPECT_EQ(s.models(), std::vector<std::string>{"stories260K"});  // nothing half-loaded

  const auto ok = s.load({{"lora_name", "poet"}, {"lora_path", p}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, "Success: LoRA adapter 'poet' added successfully.");
  EXPECT_EQ(s.models(), (std::vector<std::string>{"stories260K", "poet"}));
  expect_error(s.load({{"lora_name", "poet"}, {"lora_path", p}}), 400,
               {"The lora adapter 'poet' has already been loaded."});
  const auto poet = s.complete("poet", "Once upon");
  EXPECT_EQ(poet.status, 200) << poet.body;
  EXPECT_EQ(poet.json()["choices"][0]["text"], offline({{"poet", p}}, "Once upon", "poet", 16));

  expect_error(s.unload(json::object()), 400, {"'lora_name' needs to be provided"});
  expect_error(s.unload({{"lora_name", "nope"}}), 404, {"The lora adapter 'nope' cannot be found."});
  const auto gone = s.unload({{"lora_name", "poet"}});
  EXPECT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.body, "Success: LoRA adapter 'poet' removed successfully.");
  EXPECT_EQ(s.models(), std::vector<std::string>{"stories260K"});
  const auto unloaded = s.complete("poet", "Once upon");  // vLLM's answer once the adapter is gone
  expect_error(unloaded, 404, {"The model `poet` does not exist."});
  EXPECT_EQ(unloaded.json()["error"]["type"], "NotFoundError");
  expect_error(s.unload({{"lora_name", "poet"}}), 404, {"cannot be found"});
  EXPECT_EQ(s.complete("stories260K", "Once upon").status, 200);  // still serving
  EXPECT_EQ(s.engine.stats().graphs.graph_captures_after_startup, 0u);
}

// Streams of the base model and of adapter "a" run while "b" is loaded and used, "a" is
// unloaded (its running requests finish with it) and "b" unloaded: each text equals its text alone.
TEST(LoraEndpoints, LoadAndUnloadUnderLoad) {
  test::TempDir tmp;
  const std::string a = (tmp.path() / "a").string(), b = (tmp.path() / "b").string();
  test::write_adapter(a, AdapterSpec{.rank = 4, .alpha = 8, .seed = 11});
  test::write_adapter(b, AdapterSpec{.rank = 8, .alpha = 8, .seed = 12});
  LoraServer s(lora_config(), tmp.path());
  ASSERT_EQ(s.load({{"lora_name", "a"}, {"lora_path", a}}).status, 200);
  constexpr int kTokens = 400;
  const std::vector<std::pair<std::string, std::string>> first = {
      {"stories260K", "Once upon"}, {"a", "Once upon"}, {"a", "The cat"}, {"stories260K", "The dog"}};
  std::vector<std::future<test::HttpResult>> running;
  for (const auto& [model, prompt] : first)
    running.push_back(
        std::async(std::launch::async, [&s, m = model, pr = prompt] { return s.complete(m, pr, kTokens); }));
  for (int i = 0; i < 5000 && s.engine.stats().num_running < int(first.size()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // all four run
  ASSERT_EQ(s.load({{"lora_name", "b"}, {"lora_path", b}}).status, 200);
  auto with_b = std::async(std::launch::async, [&s] { return s.complete("b", "The cat", kTokens); });
  ASSERT_EQ(s.unload({{"lora_name", "a"}}).status, 200);
  const std::string b_text = with_b.get().json()["choices"][0]["text"];
  ASSERT_EQ(s.unload({{"lora_name", "b"}}).status, 200);

  const std::vector<std::pair<std::string, std::string>> modules = {{"a", a}, {"b", b}};
  for (size_t i = 0; i < first.size(); ++i) {
    const auto r = running[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string lora = first[i].first == "stories260K" ? "" : first[i].first;
    EXPECT_EQ(r.json()["choices"][0]["text"], offline(modules, first[i].second, lora, kTokens)) << "request " << i;
  }
  EXPECT_EQ(b_text, offline(modules, "The cat", "b", kTokens));
  EXPECT_EQ(s.models(), std::vector<std::string>{"stories260K"});
  EXPECT_EQ(s.engine.stats().graphs.graph_captures_after_startup, 0u);
}

}  // namespace
}  // namespace gs
