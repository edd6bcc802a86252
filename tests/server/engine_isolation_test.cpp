// Engine isolation: a request that makes a step fail is aborted alone, with an error naming the
// cause, while the other requests of that step go on. The fault is injected by wrapping the real
// executor (stories260K on the CPU) in one that throws on any batch holding a marked request.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/error.h"
#include "engine/nan_logits_executor.h"
#include "executor/executor.h"
#include "http_client.h"
#include "real_server.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

using nlohmann::json;

constexpr uint64_t kPoisonSeed = 666;  // requests with this seed make every step they are in fail

// The engine frees a finished request's KV blocks on its own thread, after the reply may already
// have reached the client, and publishes its stats after the step: wait (bounded) until the stats
// show nothing running, then every block must be free.
void expect_every_kv_block_back(EngineLoop& engine) {
  EngineStats st = engine.stats();
  for (int i = 0; i < 500 && (st.num_running > 0 || st.kv_blocks_free != st.kv_blocks_total); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = engine.stats();
  }
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
}

class FaultInjectingExecutor final : public Executor {
 public:
  explicit FaultInjectingExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  RunnerOutput execute(const SchedulerOutput& batch) override {
    for (const auto& r : batch.requests)
      if (r.params && r.params->seed == kPoisonSeed) {
        largest_failed_batch = std::max(largest_failed_batch.load(), static_cast<int>(batch.requests.size()));
        throw Error("injected fault: request seed 666");
      }
    return inner_->execute(batch);
  }
  const ModelConfig& model_config() const override { return inner_->model_config(); }
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int block_size() const override { return inner_->block_size(); }
  int max_model_len() const override { return inner_->max_model_len(); }
  std::atomic<int> largest_failed_batch{0};

 private:
  std::unique_ptr<Executor> inner_;
};

TEST(EngineIsolation, AFailingRequestIsAbortedAloneAndTheOthersFinish) {
  const EngineConfig cfg = test::stories_config();
  auto exec = std::make_unique<FaultInjectingExecutor>(make_runner_executor(cfg));
  FaultInjectingExecutor* faults = exec.get();
  EngineLoop engine(std::make_unique<LLMEngine>(cfg, std::move(exec), Tokenizer::from_dir(cfg.model)));
  ServerConfig scfg;
  scfg.port = 0;
  ApiServer server(engine, scfg);
  server.start();
  const int port = server.port();

  constexpr int kStreams = 16, kTokens = 120;
  std::atomic<int> good{0};
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.emplace_back([&, i] {
      json body = {{"prompt", "Once upon a time"},
                   {"max_tokens", kTokens},
                   {"ignore_eos", true},
                   {"stream", true},
                   {"seed", i},
                   {"stream_options", {{"include_usage", true}}}};
      auto s = test::post_stream(port, "/v1/completions", body.dump());
      if (s.done && s.events.size() >= 2 && s.events.back()["usage"]["completion_tokens"] == kTokens)
        ++good;
      else
        ADD_FAILURE() << "stream " << i << ": " << s.raw.substr(0, 500);
    });
  // Poison while the streams are decoding, once non-streaming and once streaming.
  for (int i = 0; i < 2500 && engine.stats().num_running < kStreams / 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto bad = test::post(port, "/v1/completions", R"({"prompt":"Once","max_tokens":5,"seed":666})");
  auto bad_stream =
      test::post_stream(port, "/v1/completions", R"({"prompt":"Once","max_tokens":5,"seed":666,"stream":true})");
  for (auto& t : streams) t.join();

  EXPECT_EQ(good.load(), kStreams);
  EXPECT_GT(faults->largest_failed_batch.load(), 1) << "the fault never shared a step with other requests";
  EXPECT_EQ(bad.status, 500) << bad.body;
  EXPECT_NE(bad.body.find("injected fault"), std::string::npos) << bad.body;
  EXPECT_TRUE(bad_stream.done);
  ASSERT_FALSE(bad_stream.events.empty());
  EXPECT_NE(bad_stream.events.back()["error"]["message"].get<std::string>().find("injected fault"), std::string::npos)
      << bad_stream.raw;
  expect_every_kv_block_back(engine);
}

// A request whose logits turn NaN mid-decode fails with a 500 naming the problem (an error event
// when streamed) instead of returning <unk>; /metrics counts the rows; every KV block comes back.
TEST(EngineIsolation, NonFiniteLogitsFailTheRequestWithAClearError) {
  const EngineConfig cfg = test::stories_config();
  EngineLoop engine(
      std::make_unique<LLMEngine>(cfg, std::make_unique<test::NanLogitsExecutor>(make_runner_executor(cfg)),
                                  Tokenizer::from_dir(cfg.model)),
      test::kTestChatTemplate);
  ServerConfig scfg;
  scfg.port = 0;
  ApiServer server(engine, scfg);
  server.start();
  const int port = server.port();
  const std::string want = "the model produced non-finite logits (NaN/Inf) for this request";
  const auto good = test::post(port, "/v1/completions", R"({"prompt":"Once","max_tokens":8,"seed":1})");
  EXPECT_EQ(good.status, 200) << good.body;
  const auto bad = test::post(port, "/v1/completions", R"({"prompt":"Once","max_tokens":8,"seed":666})");
  EXPECT_EQ(bad.status, 500) << bad.body;
  EXPECT_NE(bad.body.find(want), std::string::npos) << bad.body;
  EXPECT_EQ(bad.body.find("<unk>"), std::string::npos) << bad.body;
  const auto s =
      test::post_stream(port, "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"Once"}],"max_tokens":8,"seed":666,"stream":true})");
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 2u) << s.raw;  // tokens before the logits broke, then the error
  EXPECT_NE(s.events.back()["error"]["message"].get<std::string>().find(want), std::string::npos) << s.raw;
  EXPECT_EQ(s.events.back()["error"]["type"], "server_error") << s.raw;
  expect_every_kv_block_back(engine);  // also waits for the stats /metrics reads to cover the last step
  const auto metrics = test::get(port, "/metrics").body;
  EXPECT_NE(metrics.find("\ngraphserve_non_finite_logits_total 2\n"), std::string::npos) << metrics.substr(0, 2000);
}

}  // namespace
}  // namespace gs
