// Run-time LoRA adapters on the CPU with stories260K: adapters are read on another thread while
// the engine steps, installed and removed between steps while requests of other adapters and of
// the base model run, and every request's tokens equal running it alone (with the adapter it
// started with, even when that adapter was removed meanwhile). Removed adapters stay in host
// memory until their last request ends; no graph is captured after start-up. The host cache
// (--max-cpu-loras) is an LRU over every served adapter: with default flags every one of
// --lora-modules is served, those it dropped read again from their directory when named.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/lora_test_util.h"
#include "test_paths.h"

namespace gs {
namespace {

using test::AdapterSpec;

const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 403, 407, 261, 378, 432}, {1, 385, 328, 432, 261, 376, 268, 414}, {1, 300, 301}, {1, 450, 20, 33, 97, 122}};
constexpr int kMaxTokens = 24;

EngineConfig lora_config(CUDAGraphMode mode) {
  EngineConfig cfg;
  cfg.model = test::stories260k_dir().string();
  cfg.device = "cpu";
  cfg.max_num_seqs = 8;
  cfg.max_num_batched_tokens = 64;
  cfg.compilation.cudagraph_mode = mode;
  cfg.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16};
  cfg.enable_lora = true;
  cfg.max_lora_rank = 8;
  cfg.max_loras = 2;
  cfg.max_cpu_loras = 3;
  return cfg;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = kMaxTokens;
  return p;
}

// Steps `e`, appending each request's tokens to `out`, `n` times or until it is idle.
void step(LLMEngine& e, std::map<RequestId, std::vector<int32_t>>& out, int n = 1) {
  for (int i = 0; i < n && e.has_unfinished_requests(); ++i)
    for (const auto& o : e.step()) out[o.id].insert(out[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
}

class LoraAdapters : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 4; ++i)
      test::write_adapter(dir(i), AdapterSpec{.rank = i == 2 ? 8 : 4, .alpha = 8, .seed = uint32_t(40 + i)});
  }
  std::string dir(int i) const { return (tmp.path() / ("ad" + std::to_string(i))).string(); }
  // A request's tokens run alone on an engine serving adapters 0..3 (names "a0".."a3").
  std::vector<int32_t> alone(const std::vector<int32_t>& prompt, const std::string& lora) {
    if (!ref) {
      EngineConfig cfg = lora_config(CUDAGraphMode::NONE);
      cfg.max_cpu_loras = 4;
      for (int i = 0; i < 4; ++i) cfg.lora_modules.emplace_back("a" + std::to_string(i), dir(i));
      ref = std::make_unique<LLMEngine>(cfg);
    }
    std::map<RequestId, std::vector<int32_t>> out;
    const RequestId id = ref->add_request(prompt, greedy(), lora);
    step(*ref, out, 1 << 20);
    return out[id];
  }

  test::TempDir tmp;
  std::unique_ptr<LLMEngine> ref;
};

class LoraLoad : public LoraAdapters, public ::testing::WithParamInterface<CUDAGraphMode> {};

TEST_P(LoraLoad, LoadAndUnloadUnderLoadKeepEveryRequestIntact) {
  EngineConfig cfg = lora_config(GetParam());
  cfg.lora_modules = {{"a0", dir(0)}, {"a1", dir(1)}};
  LLMEngine e(cfg);
  std::map<RequestId, std::vector<int32_t>> out;
  std::vector<std::pair<RequestId, std::pair<size_t, std::string>>> reqs;  // id, (prompt, adapter)
  auto add = [&](size_t prompt, const std::string& lora) {
    reqs.push_back({e.add_request(kPrompts[prompt], greedy(), lora), {prompt, lora}});
  };
  add(0, "a0"), add(1, ""), add(2, "a1");
  step(e, out, 2);

  // a2 is read on another thread while this one steps (two steps, whatever the read's speed: the
  // requests' progress must not depend on thread timing), then installed between steps.
  auto reading = std::async(std::launch::async, [&] { return e.read_lora_adapter("a2", dir(2)); });
  step(e, out, 2);
  e.add_lora_adapter("a2", reading.get());
  add(3, "a2");
  step(e, out, 2);

  // a0 is removed while its request runs (6 of its 24 tokens so far): that request finishes with
  // it, new ones are refused.
  ASSERT_EQ(out[reqs[0].first].size(), 6u);
  e.remove_lora_adapter("a0");
  EXPECT_THROW(e.add_request(kPrompts[1], greedy(), "a0"), Error);
  EXPECT_EQ(e.lora_names(), (std::vector<std::string>{"a1", "a2"}));
  // a0's weights are still held for its request, and every other adapter has a request: a fourth
  // adapter goes beyond --max-cpu-loras 3, since nothing can be dropped yet.
  e.add_lora_adapter("a3", e.read_lora_adapter("a3", dir(3)));
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a1", "a2", "a3"}));
  // The next request names a1: the cache is over capacity and a3 is the one no request uses.
  add(0, "a1");
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a1", "a2"}));
  step(e, out, 3);
  e.remove_lora_adapter("a2");  // while its request runs, too
  step(e, out, 1 << 20);        // every request ends: a0 and a2 are freed
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a1"}));

  // a0 comes back under its old name (a new id); a3 is read again from its directory.
  e.add_lora_adapter("a0", e.read_lora_adapter("a0", dir(0)));
  EXPECT_THROW(e.add_lora_adapter("a0", e.read_lora_adapter("a0", dir(0))), Error);  // a name in use
  add(1, "a3"), add(2, "a0"), add(3, "");
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a1", "a3", "a0"}));
  step(e, out, 1 << 20);

  for (const auto& [id, what] : reqs) {
    EXPECT_EQ(out[id].size(), size_t(kMaxTokens)) << "request " << id;
    EXPECT_EQ(out[id], alone(kPrompts[what.first], what.second))
        << "request " << id << " (prompt " << what.first << ", adapter '" << what.second << "')";
  }
  EXPECT_NE(alone(kPrompts[0], "a0"), alone(kPrompts[0], ""));  // the adapters change the tokens
  EXPECT_EQ(e.stats().graphs.graph_captures_after_startup, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, LoraLoad, ::testing::Values(CUDAGraphMode::NONE, CUDAGraphMode::FULL_AND_PIECEWISE),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

// vLLM's defaults: --max-loras 1, --max-cpu-loras = --max-loras. Three --lora-modules are all
// served from a host cache of one adapter: the engine starts with the first held, reads the
// others when requests name them (or takes the image a caller read off its thread), holds every
// adapter a live request uses, and drops the least recently used ones once requests end.
TEST_F(LoraAdapters, DefaultFlagsServeEveryModuleThroughTheHostCache) {
  EngineConfig cfg = lora_config(CUDAGraphMode::NONE);
  cfg.max_loras = 1;
  cfg.max_cpu_loras = 0;
  for (int i = 0; i < 3; ++i) cfg.lora_modules.emplace_back("a" + std::to_string(i), dir(i));
  LLMEngine e(cfg);
  EXPECT_EQ(e.lora_names(), (std::vector<std::string>{"a0", "a1", "a2"}));
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a0"}));
  EXPECT_EQ(e.lora_path("a2"), dir(2));

  std::map<RequestId, std::vector<int32_t>> out;
  const RequestId r2 = e.add_request(kPrompts[0], greedy(), "a2");  // read here; a0 is dropped
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a2"}));
  const RequestId r1 = e.add_request(kPrompts[1], greedy(), "a1", e.read_lora_adapter("a1", dir(1)));
  const RequestId r0 = e.add_request(kPrompts[2], greedy(), "a0");
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a0", "a1", "a2"}));  // each has a live request
  const RequestId rb = e.add_request(kPrompts[3], greedy(), "");
  step(e, out, 1 << 20);
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a0"}));  // the most recently named one

  EXPECT_EQ(out[r2], alone(kPrompts[0], "a2"));
  EXPECT_EQ(out[r1], alone(kPrompts[1], "a1"));
  EXPECT_EQ(out[r0], alone(kPrompts[2], "a0"));
  EXPECT_EQ(out[rb], alone(kPrompts[3], ""));
  EXPECT_NE(alone(kPrompts[0], "a2"), alone(kPrompts[0], "a1"));  // the adapters differ

  // An adapter that can no longer be read is refused with its directory; the others still run.
  std::filesystem::remove_all(dir(1));
  try {
    e.add_request(kPrompts[1], greedy(), "a1");
    FAIL() << "a dropped adapter whose directory is gone must be refused";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("could not be read again from " + dir(1)), std::string::npos) << ex.what();
  }
  const RequestId again = e.add_request(kPrompts[0], greedy(), "a2");
  step(e, out, 1 << 20);
  EXPECT_EQ(out[again], alone(kPrompts[0], "a2"));
  EXPECT_EQ(e.held_lora_names(), (std::vector<std::string>{"a2"}));
}

TEST(LoraLoadErrors, MalformedAdaptersAndUnknownNamesAreRefused) {
  test::TempDir tmp;
  LLMEngine e(lora_config(CUDAGraphMode::NONE));
  const auto big = tmp.path() / "big";
  test::write_adapter(big, AdapterSpec{.rank = 16, .alpha = 16});
  try {
    e.read_lora_adapter("big", big.string());
    FAIL() << "rank 16 above --max-lora-rank 8 must be refused";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("adapter_config.json: 'r' is 16"), std::string::npos) << ex.what();
  }
  EXPECT_THROW(e.remove_lora_adapter("nope"), Error);
  EXPECT_TRUE(e.lora_names().empty());
  EngineConfig plain_cfg = lora_config(CUDAGraphMode::NONE);
  plain_cfg.enable_lora = false;
  LLMEngine plain(plain_cfg);
  try {
    plain.read_lora_adapter("big", big.string());
    FAIL() << "an engine without --enable-lora must refuse adapters";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("--enable-lora"), std::string::npos) << ex.what();
  }
}

}  // namespace
}  // namespace gs
