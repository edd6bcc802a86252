// Run-time LoRA adapters on the CPU with stories260K: adapters are read on another thread while
// the engine steps, installed and removed between steps while requests of other adapters and of
// the base model run, and every request's tokens equal running it alone (with the adapter it
// started with, even when that adapter was removed meanwhile). Removed adapters stay in host
// memory until their last request ends; no graph is captured after start-up.
#include <gtest/gtest.h>

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

class LoraLoad : public ::testing::TestWithParam<CUDAGraphMode> {
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

  // a2 is read on another thread while this one keeps stepping, then installed between steps.
  auto reading = std::async(std::launch::async, [&] { return e.read_lora_adapter("a2", dir(2)); });
  do step(e, out);
  while (reading.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready);
  e.add_lora_adapter("a2", reading.get());
  add(3, "a2");
  step(e, out, 2);

  // a0 is removed while its request runs: that request finishes with it, new ones are refused.
  e.remove_lora_adapter("a0");
  EXPECT_THROW(e.add_request(kPrompts[1], greedy(), "a0"), Error);
  EXPECT_EQ(e.lora_names(), (std::vector<std::string>{"a1", "a2"}));
  // a0's weights are still held for its request: a fourth adapter exceeds --max-cpu-loras 3.
  try {
    e.add_lora_adapter("a3", e.read_lora_adapter("a3", dir(3)));
    FAIL() << "a fourth adapter in host memory must be refused";
  } catch (const Error& ex) {
    EXPECT_NE(std::string(ex.what()).find("--max-cpu-loras"), std::string::npos) << ex.what();
  }
  add(0, "a1");
  step(e, out, 3);
  e.remove_lora_adapter("a2");  // while its request runs, too
  step(e, out, 1 << 20);        // every request ends: a0 and a2 are freed

  // Room again: a3 loads, and a0 comes back under its old name (a new id).
  e.add_lora_adapter("a3", e.read_lora_adapter("a3", dir(3)));
  e.add_lora_adapter("a0", e.read_lora_adapter("a0", dir(0)));
  EXPECT_THROW(e.add_lora_adapter("a0", e.read_lora_adapter("a0", dir(0))), Error);  // a name in use
  add(1, "a3"), add(2, "a0"), add(3, "");
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
