// Who may change LoRA adapters over HTTP (server/lora_policy.h), on a real server (stories260K on
// the CPU): the route matrix (opt-in off / on x --enable-lora off / on x adapters of
// --lora-modules), the allowed directories (symbolic links, '..', NUL, a file linked to
// /etc/passwd: one answer whatever the reason), names (length, characters, log lines) and the
// adapter's name in a completion's "model".
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"

#include "engine/lora_test_util.h"
#include "http_client.h"
#include "real_server.h"
#include "server/lora_policy.h"

namespace gs {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Server {
  Server(bool opt_in, bool enable_lora, const fs::path& root, const fs::path& prod)
      : engine(std::make_unique<LLMEngine>(config(enable_lora, prod)), "") {
    ServerConfig scfg;
    scfg.port = 0;
    scfg.lora = {.allow_runtime_updating = opt_in, .roots = {root.string()}};
    server = std::make_unique<ApiServer>(engine, scfg);
    server->start();
  }
  static EngineConfig config(bool enable_lora, const fs::path& prod) {
    EngineConfig cfg = test::stories_config();
    cfg.enable_lora = enable_lora;
    cfg.max_lora_rank = 8;
    cfg.max_loras = 2;
    cfg.max_cpu_loras = 4;  // prod and one run-time adapter
    if (enable_lora) cfg.lora_modules = {{"prod", prod.string()}};
    return cfg;
  }
  test::HttpResult load(const std::string& name, const std::string& path) const {
    return test::post(server->port(), "/v1/load_lora_adapter", json{{"lora_name", name}, {"lora_path", path}}.dump());
  }
  test::HttpResult unload(const std::string& name) const {
    return test::post(server->port(), "/v1/unload_lora_adapter", json{{"lora_name", name}}.dump());
  }
  EngineLoop engine;
  std::unique_ptr<ApiServer> server;
};

struct Dirs {
  Dirs() {
    test::write_adapter(root() / "prod", test::AdapterSpec{.seed = 1});
    test::write_adapter(root() / "new", test::AdapterSpec{.seed = 2});
    test::write_adapter(outside() / "evil", test::AdapterSpec{.seed = 3});
  }
  fs::path root() const { return tmp.path() / "loras"; }
  fs::path outside() const { return tmp.path() / "elsewhere"; }
  test::TempDir tmp;
};

TEST(LoraPolicy, RouteMatrix) {
  Dirs d;
  for (bool opt_in : {false, true})
    for (bool enable_lora : {false, true}) {
      SCOPED_TRACE(fmt::format("opt-in {} enable-lora {}", opt_in, enable_lora));
      Server s(opt_in, enable_lora, d.root(), d.root() / "prod");
      const int port = s.server->port();
      if (!opt_in) {  // 404 before the body is looked at
        for (const char* route : {"/v1/load_lora_adapter", "/v1/unload_lora_adapter"}) {
          EXPECT_EQ(test::post(port, route, "{not json").status, 404);
          EXPECT_EQ(test::post(port, route, R"({"lora_name":"prod","lora_path":"/root"})").status, 404);
        }
        continue;
      }
      if (!enable_lora) {  // the feature is checked before the path: /root and /root/.ssh answer alike
        const auto a = s.load("x", "/root"), b = s.load("x", "/root/.ssh");
        EXPECT_EQ(a.status, 400) << a.body;
        EXPECT_EQ(a.body, b.body);
        EXPECT_NE(a.body.find("--enable-lora"), std::string::npos) << a.body;
        EXPECT_EQ(s.unload("x").status, 400);
        continue;
      }
      const auto unload_prod = s.unload("prod");
      EXPECT_EQ(unload_prod.status, 403) << unload_prod.body;
      EXPECT_NE(unload_prod.body.find("--lora-modules"), std::string::npos) << unload_prod.body;
      EXPECT_EQ(s.load("prod", (d.root() / "new").string()).status, 403);
      const auto ok = s.load("new", (d.root() / "new").string());
      EXPECT_EQ(ok.status, 200) << ok.body;
      EXPECT_EQ(s.unload("new").status, 200);
      const auto models = test::get(port, "/v1/models").json();
      ASSERT_EQ(models["data"].size(), 2u);
      EXPECT_EQ(models["data"][1]["id"], "prod");
    }
}

// Every path that is not an adapter inside the allowed directory gets the same answer, which
// holds neither the path nor anything read from the files; the adapter inside loads.
TEST(LoraPolicy, PathsStayInsideTheLoraDirectory) {
  Dirs d;
  fs::create_symlink(d.outside() / "evil", d.root() / "link_out");
  test::write_adapter(d.root() / "passwd", test::AdapterSpec{});
  fs::remove(d.root() / "passwd" / "adapter_model.safetensors");
  fs::create_symlink("/etc/passwd", d.root() / "passwd" / "adapter_model.safetensors");
  std::ofstream(d.root() / "file") << "not a directory";
  Server s(true, true, d.root(), d.root() / "prod");
  const std::vector<std::string> refused = {
      (d.outside() / "evil").string(),
      (d.root() / "link_out").string(),
      (d.root() / ".." / "elsewhere" / "evil").string(),
      (d.root() / "passwd").string(),
      (d.root() / "missing").string(),
      (d.root() / "file").string(),
      "/root/.ssh",
      (d.root() / "new").string() + std::string(1, '\0') + "x",
      "relative/path",
  };
  std::string first;
  for (const std::string& p : refused) {
    const auto r = s.load("x", p);
    EXPECT_EQ(r.status, 400) << p << ": " << r.body;
    if (first.empty()) first = r.body;
    EXPECT_EQ(r.body, first) << p;
  }
  for (const char* leak : {"elsewhere", "passwd", "root", "bytes", "ssh"})
    EXPECT_EQ(first.find(leak), std::string::npos) << leak << " in " << first;
  EXPECT_EQ(s.load("new", (d.root() / "new").string()).status, 200);
}

TEST(LoraPolicy, NoDirectoryAllowedRefusesEveryPath) {
  Dirs d;
  std::string why;
  EXPECT_FALSE(resolve_adapter_dir((d.root() / "new").string(), {}, why));
  EXPECT_NE(why.find("--lora-dir"), std::string::npos) << why;
  EXPECT_TRUE(resolve_adapter_dir((d.root() / "new").string(), {d.root().string()}, why));
}

TEST(LoraPolicy, Names) {
  Dirs d;
  Server s(true, true, d.root(), d.root() / "prod");
  const std::string path = (d.root() / "new").string();
  const auto newline = s.load("a\n[ERROR] forged", path);
  EXPECT_EQ(newline.status, 400) << newline.body;
  EXPECT_NE(newline.body.find("lora_name"), std::string::npos);
  const auto huge = s.load(std::string(1 << 20, 'a'), path);
  EXPECT_EQ(huge.status, 400);
  EXPECT_LT(huge.body.size(), 1000u);  // not echoed
  EXPECT_EQ(s.unload(std::string(1 << 20, 'a')).status, 400);
  const auto model = test::post(s.server->port(), "/v1/completions",
                                json{{"model", std::string(1 << 20, 'm')}, {"prompt", "x"}}.dump());
  EXPECT_EQ(model.status, 400);
  EXPECT_LT(model.body.size(), 1000u);
  EXPECT_EQ(log_safe("a\nb'\x01"), "a\\x0ab\\x27\\x01");
  EXPECT_EQ(model_name_problem("meta-llama/Llama-3.2-1B-Instruct"), "");
  EXPECT_NE(model_name_problem("a b"), "");
  EXPECT_NE(model_name_problem(""), "");
}

TEST(LoraPolicy, SwitchReadsAsVllmDoes) {
  for (const char* on : {"true", "True", "TRUE", "1", " true\n"}) EXPECT_TRUE(runtime_lora_switch_on(on)) << on;
  for (const char* off : {"", "0", "false", "yes", "2"}) EXPECT_FALSE(runtime_lora_switch_on(off)) << off;
}

TEST(LoraPolicy, InvalidServedNameRefusedAtStart) {
  EngineConfig cfg = test::stories_config();
  cfg.served_model_name = "bad name\n";
  EngineLoop engine(std::make_unique<LLMEngine>(cfg), "");
  ServerConfig scfg;
  scfg.port = 0;
  EXPECT_THROW({ ApiServer server(engine, scfg); }, Error);
}

// vLLM names the adapter in a completion's "model".
TEST(LoraPolicy, CompletionReportsTheAdapter) {
  Dirs d;
  Server s(false, true, d.root(), d.root() / "prod");
  const auto r = test::post(s.server->port(), "/v1/completions",
                            json{{"model", "prod"}, {"prompt", "Once"}, {"max_tokens", 2}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["model"], "prod");
  const auto base = test::post(s.server->port(), "/v1/completions",
                               json{{"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(base.json()["model"], "stories260K");
}

}  // namespace
}  // namespace gs
