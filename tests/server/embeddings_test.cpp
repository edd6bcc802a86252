// /v1/embeddings on a pooling runner (stories260K, CPU) equals the CPU reference: the model's own
// eager forward of each whole prompt (tests/model's harness: no runner, no engine, no chunking),
// its final hidden state at the last token (or the mean over the prompt), L2-normalised. The
// server prefills with a small token budget, so prompts are chunked and batched together.
#include <gtest/gtest.h>

#include <cmath>

#include "../model/model_harness.h"
#include "http_client.h"
#include "real_server.h"

namespace gs {
namespace {

using nlohmann::json;

// The reference embedding of `ids`: one eager forward of the whole prompt.
std::vector<float> reference(const std::vector<int32_t>& ids, bool mean) {
  ModelSource src;
  src.dir = test::stories260k_dir().string();
  test::ModelHarness h(src);
  const ForwardInputs in = h.prepare({{0, std::vector<int>(ids.begin(), ids.end())}});
  h.run(in);
  h.backend().stream().synchronize();
  const Tensor hidden = h.model().final_hidden();
  EXPECT_EQ(hidden.dtype(), DType::F32);
  const int64_t width = hidden.dim(1), n = int64_t(ids.size());
  std::vector<double> v(size_t(width), 0.0);
  for (int64_t r = mean ? 0 : n - 1; r < n; ++r)
    for (int64_t c = 0; c < width; ++c) v[size_t(c)] += hidden.data_as<float>()[r * width + c];
  double norm = 0.0;
  for (double x : v) norm += x * x;
  std::vector<float> out;
  for (double x : v) out.push_back(float(x / std::sqrt(norm)));
  return out;
}

struct PoolingServer {
  explicit PoolingServer(const std::string& pooling_type) : engine(make_engine(pooling_type)) {
    ServerConfig cfg;
    cfg.port = 0;
    server = std::make_unique<ApiServer>(engine, cfg);
    server->start();
  }
  static std::unique_ptr<LLMEngine> make_engine(const std::string& pooling_type) {
    EngineConfig cfg = test::stories_config();
    cfg.runner = "pooling";
    cfg.pooling_type = pooling_type;
    cfg.max_num_batched_tokens = 16;  // prompts of 20+ tokens prefill in chunks, several per step
    return std::make_unique<LLMEngine>(cfg);
  }
  int port() const { return server->port(); }
  EngineLoop engine;
  std::unique_ptr<ApiServer> server;
};

void expect_close(const json& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double dot = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    dot += got[i].get<double>() * want[i];
    max_diff = std::max(max_diff, std::abs(got[i].get<double>() - want[i]));
  }
  EXPECT_LT(max_diff, 1e-4);
  EXPECT_NEAR(dot, 1.0, 1e-5);
}

const std::vector<std::string> kTexts = {
    "Once upon a time, there was a little girl named Lily who loved to play outside in the sun.",
    "The cat sat on the mat.", "Tom had a big red ball and he wanted to share it with his friends at the park."};

TEST(Embeddings, LastTokenPoolingEqualsTheCpuReference) {
  PoolingServer srv("");
  auto r = test::post(srv.port(), "/v1/embeddings", json{{"input", kTexts}, {"model", "stories260K"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), kTexts.size());
  int tokens = 0;
  for (size_t i = 0; i < kTexts.size(); ++i) {
    SCOPED_TRACE(kTexts[i]);
    EXPECT_EQ(j["data"][i]["index"], i);
    const std::vector<int32_t> ids = srv.engine.encode(kTexts[i], true);
    tokens += int(ids.size());
    expect_close(j["data"][i]["embedding"], reference(ids, /*mean=*/false));
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);

  // Token ids, one list or several, give the same vectors as their text.
  const std::vector<int32_t> ids = srv.engine.encode(kTexts[1], true);
  auto one = test::post(srv.port(), "/v1/embeddings", json{{"input", ids}}.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  expect_close(one.json()["data"][0]["embedding"], reference(ids, false));
  auto many =
      test::post(srv.port(), "/v1/embeddings", json{{"input", {ids, ids}}, {"encoding_format", "float"}}.dump());
  ASSERT_EQ(many.status, 200) << many.body;
  EXPECT_EQ(many.json()["data"].size(), 2u);
  expect_close(many.json()["data"][1]["embedding"], reference(ids, false));
  auto b64 = test::post(srv.port(), "/v1/embeddings", json{{"input", "hi"}, {"encoding_format", "base64"}}.dump());
  ASSERT_EQ(b64.status, 200) << b64.body;
  EXPECT_TRUE(b64.json()["data"][0]["embedding"].is_string());
}

TEST(Embeddings, MeanPoolingEqualsTheCpuReference) {
  PoolingServer srv("mean");
  auto r = test::post(srv.port(), "/v1/embeddings", json{{"input", kTexts[0]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  expect_close(r.json()["data"][0]["embedding"], reference(srv.engine.encode(kTexts[0], true), /*mean=*/true));
}

TEST(Embeddings, BadRequestsAndTheWrongRunnerAreRefused) {
  PoolingServer srv("");
  const std::pair<std::string, const char*> cases[] = {
      {R"({"input":"x","dimensions":8})", "Matryoshka"},
      {R"({"input":[]})", "input"},
      {R"({"input":[1,99999999]})", "token ids"},
      {R"({"input":[[]]})", "empty"},
      {R"({"input":"x","encoding_format":"hex"})", "encoding_format"},
      {R"({"input":"x","model":"nope"})", "nope"},
  };
  for (const auto& [body, fragment] : cases) {
    auto r = test::post(srv.port(), "/v1/embeddings", body);
    EXPECT_GE(r.status, 400) << body;
    EXPECT_LT(r.status, 500) << body;
    EXPECT_NE(r.body.find(fragment), std::string::npos) << r.body;
  }
  auto gen = test::post(srv.port(), "/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(gen.status, 400);
  EXPECT_NE(gen.body.find("/v1/embeddings"), std::string::npos) << gen.body;

  test::RealServer generation;
  auto emb = test::post(generation.port(), "/v1/embeddings", R"({"input":"x"})");
  EXPECT_EQ(emb.status, 400);
  EXPECT_NE(emb.body.find("--runner pooling"), std::string::npos) << emb.body;
}

}  // namespace
}  // namespace gs
