// LoRA with tensor parallelism through worker processes (the graphserve binary), stories260K on
// the CPU: adapters of --lora-modules at TP 2 (and in one mp worker) give TP 1's greedy tokens,
// two adapters and the base model in one batch, through a host cache of one adapter (so ranks
// drop and read adapters again between rounds); adapters loaded and unloaded at run time reach
// every rank; a malformed adapter gets TP 1's error, one that only the workers fail to read is
// refused with their error and held by no rank, and the engine serves on; over HTTP, both get
// the same 400 as at TP 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/lora_test_util.h"
#include "golden.h"
#include "multiproc_config.h"
#include "server/api_server.h"
#include "server/engine_loop.h"
#include "server/http_client.h"
#include "test_paths.h"

namespace gs {
namespace {

using test::AdapterSpec;

EngineConfig lora_config(int tp, const std::string& backend = "") {
  EngineConfig c = test::multiproc_stories_config(tp);
  c.distributed_executor_backend = backend;
  c.worker_timeout_s = 30.0;
  c.enable_lora = true;
  c.max_loras = 2;
  c.max_lora_rank = 8;
  return c;
}

std::vector<int32_t> prompt(const std::string& name) {
  return test::stories_golden(name)["input_ids"].get<std::vector<int32_t>>();
}

// Greedy tokens of each (prompt, adapter) pair ("" the base model), all queued at once.
std::vector<std::vector<int32_t>> generate(LLMEngine& e, const std::vector<std::pair<std::string, std::string>>& reqs,
                                           int max_tokens = 24) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < reqs.size(); ++i) which[e.add_request(prompt(reqs[i].first), p, reqs[i].second)] = i;
  std::vector<std::vector<int32_t>> out(reqs.size());
  while (e.has_unfinished_requests())
    for (const auto& o : e.step()) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      auto& v = out[which.at(o.id)];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  return out;
}

// The error of f(), or "" (then the test fails).
template <typename F>
std::string error_of(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

class LoraMultiproc : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_adapter(dir("a"), AdapterSpec{.rank = 4, .alpha = 8, .seed = 7});
    test::write_adapter(dir("b"), AdapterSpec{.rank = 8, .alpha = 16, .rslora = true, .seed = 11});
    test::write_adapter(dir("c"), AdapterSpec{.rank = 2, .alpha = 4, .targets = {"v_proj", "down_proj"}, .seed = 13});
  }
  std::filesystem::path dir(const std::string& name) const { return tmp.path() / name; }
  test::TempDir tmp;
  // Two adapters and the base model in one batch; then the third adapter (not in host memory) and
  // the first; then the second again.
  const std::vector<std::pair<std::string, std::string>> round1 = {
      {"short", "a"}, {"long", "b"}, {"digits", ""}, {"short", "b"}};
  const std::vector<std::pair<std::string, std::string>> round2 = {{"long", "c"}, {"short", "a"}, {"digits", "c"}};
  const std::vector<std::pair<std::string, std::string>> round3 = {{"digits", "b"}};
};

// Three adapters through a host cache of two (--max-cpu-loras 2): the ranks drop adapters and read
// them again between rounds. Every round's tokens are TP 1's, and the adapters change them.
TEST_F(LoraMultiproc, ModulesAtTp2AndInAWorkerProcessEqualTp1) {
  auto run = [&](EngineConfig c) {
    c.max_cpu_loras = 2;
    c.lora_modules = {{"a", dir("a").string()}, {"b", dir("b").string()}, {"c", dir("c").string()}};
    LLMEngine e(c);
    auto out = generate(e, round1);
    EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a", "b"}));
    for (const auto& round : {round2, round3}) {
      const auto more = generate(e, round);
      out.insert(out.end(), more.begin(), more.end());
    }
    // Round 2 read c (dropping b), round 3 read b again (dropping a, the least recently named).
    EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"b", "c"}));
    EXPECT_TRUE(e.stats().fatal_error.empty()) << e.stats().fatal_error;
    return out;
  };
  const auto ref = run(lora_config(1));
  EXPECT_EQ(run(lora_config(2)), ref);
  EXPECT_EQ(run(lora_config(1, "mp")), ref);
  EngineConfig plain = lora_config(1);
  plain.enable_lora = false;
  LLMEngine base(plain);
  const auto b = generate(base, {{"short", ""}, {"long", ""}, {"digits", ""}});
  EXPECT_NE(ref[0], b[0]) << "adapter a must change the tokens";
  EXPECT_NE(ref[1], b[1]) << "adapter b must change the tokens";
  EXPECT_EQ(ref[2], b[2]);
}

// Loaded at run time (read and checked on this thread, then held by every rank), used beside the
// base model, unloaded (then unknown) and loaded again under the same name: TP 1's tokens.
TEST_F(LoraMultiproc, LoadAndUnloadAtRunTimeReachEveryRank) {
  auto run = [&](int tp) {
    LLMEngine e(lora_config(tp));
    e.add_lora_adapter("x", e.read_lora_adapter("x", dir("a").string()));
    EXPECT_EQ(e.lora_names(), std::vector<std::string>{"x"});
    auto out = generate(e, {{"short", "x"}, {"digits", ""}});
    e.remove_lora_adapter("x");
    EXPECT_TRUE(e.lora_names().empty());
    const std::string unknown = error_of([&] { e.add_request(prompt("short"), SamplingParams{}, "x"); });
    EXPECT_NE(unknown.find("unknown LoRA adapter 'x'"), std::string::npos) << unknown;
    e.add_lora_adapter("x", e.read_lora_adapter("x", dir("b").string()));
    const auto again = generate(e, {{"short", "x"}, {"long", "x"}});
    out.insert(out.end(), again.begin(), again.end());
    EXPECT_TRUE(e.stats().fatal_error.empty()) << e.stats().fatal_error;
    return out;
  };
  const auto ref = run(1);
  EXPECT_NE(ref[0], ref[2]) << "adapters a and b give different tokens";
  EXPECT_EQ(run(2), ref);
}

// A rank above --max-lora-rank and a tensor of the wrong shape: the driver reads and checks the
// adapter with TP 1's code, so TP 2 gives TP 1's error. An adapter that was readable when checked
// but is gone when the ranks read it: add_lora_adapter throws their error, no rank holds it (the
// name loads again later), and requests of the base model and of other adapters run on.
TEST_F(LoraMultiproc, BadAdaptersAreRefusedWithTp1sErrorAndTheEngineServesOn) {
  test::write_adapter(dir("big"), AdapterSpec{.rank = 16, .alpha = 16});
  test::write_adapter(dir("shape"), AdapterSpec{.rank = 8, .targets = {"q_proj"}});
  std::ofstream(dir("shape") / "adapter_config.json")
      << nlohmann::json{{"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj"}}};
  LLMEngine tp1(lora_config(1)), tp2(lora_config(2));
  for (const char* bad : {"big", "shape"}) {
    SCOPED_TRACE(bad);
    const std::string want = error_of([&] { tp1.read_lora_adapter("x", dir(bad).string()); });
    EXPECT_NE(want.find(bad == std::string("big") ? "'r' is 16, above --max-lora-rank 8" : "has shape [8, 64]"),
              std::string::npos)
        << want;
    EXPECT_EQ(error_of([&] { tp2.read_lora_adapter("x", dir(bad).string()); }), want);
  }
  test::write_adapter(dir("gone"), AdapterSpec{.rank = 4, .alpha = 8, .seed = 3});
  const auto image = tp2.read_lora_adapter("gone", dir("gone").string());
  std::filesystem::remove_all(dir("gone"));
  const std::string err = error_of([&] { tp2.add_lora_adapter("gone", image); });
  EXPECT_NE(err.find("adapter_config.json"), std::string::npos) << err;
  EXPECT_TRUE(tp2.lora_names().empty());
  EXPECT_TRUE(tp2.stats().fatal_error.empty()) << tp2.stats().fatal_error;

  const std::vector<std::pair<std::string, std::string>> reqs = {{"short", "gone"}, {"digits", ""}};
  std::filesystem::copy(dir("a"), dir("gone"));  // the same name, now readable: every rank takes it
  for (LLMEngine* e : {&tp1, &tp2}) e->add_lora_adapter("gone", e->read_lora_adapter("gone", dir("gone").string()));
  EXPECT_EQ(generate(tp2, reqs), generate(tp1, reqs));
  EXPECT_TRUE(tp2.stats().fatal_error.empty()) << tp2.stats().fatal_error;
}

// The HTTP routes over TP 2: a malformed adapter and one the ranks cannot read get TP 1's 400
// sentence, a good one loads (200) and completes as at TP 1.
TEST_F(LoraMultiproc, HttpLoadErrorsAtTp2AreTp1s) {
  test::write_adapter(dir("big"), AdapterSpec{.rank = 16, .alpha = 16});
  auto serve = [&](int tp) {
    EngineLoop loop(std::make_unique<LLMEngine>(lora_config(tp)), "");
    ServerConfig scfg;
    scfg.port = 0;
    scfg.lora = {.allow_runtime_updating = true, .roots = {tmp.path().string()}};
    ApiServer server(loop, scfg);
    server.start();
    const auto load = [&](const std::string& name, const std::filesystem::path& d) {
      return test::post(server.port(), "/v1/load_lora_adapter",
                        nlohmann::json{{"lora_name", name}, {"lora_path", d.string()}}.dump());
    };
    std::vector<std::string> got;
    for (const char* bad : {"big", "none"}) {
      const auto r = load("x", dir(bad));
      got.push_back(std::to_string(r.status) + " " + r.body);
    }
    const auto ok = load("poet", dir("a"));
    got.push_back(std::to_string(ok.status) + " " + ok.body);
    const auto done = test::post(
        server.port(), "/v1/completions",
        nlohmann::json{
            {"model", "poet"}, {"prompt", "Once upon"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}}
            .dump());
    got.push_back(std::to_string(done.status) + " " + done.json()["choices"][0]["text"].get<std::string>());
    return got;
  };
  const auto ref = serve(1);
  ASSERT_EQ(ref.size(), 4u);
  EXPECT_EQ(ref[0].rfind("400 ", 0), 0u) << ref[0];
  EXPECT_NE(ref[0].find("'lora_path' must name a PEFT adapter directory"), std::string::npos) << ref[0];
  EXPECT_EQ(ref[2], "200 Success: LoRA adapter 'poet' added successfully.");
  EXPECT_EQ(ref[3].rfind("200 ", 0), 0u) << ref[3];
  EXPECT_EQ(serve(2), ref);
}

}  // namespace
}  // namespace gs
