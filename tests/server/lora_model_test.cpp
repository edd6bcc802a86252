// LoRA adapters by name in "model": the base name and every served adapter are accepted (the
// request carries the adapter), anything else is a 400 model_not_found listing what is served.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace gs {
namespace {

using nlohmann::json;

TEST(LoraModelParse, AdapterNameSelectsTheAdapter) {
  test::FakeEngine engine;
  engine.set_lora_names({"sql", "poet"});
  EXPECT_EQ(parse_completion_request({{"model", "fake"}, {"prompt", "hi"}}, engine).lora, "");
  EXPECT_EQ(parse_completion_request({{"model", "poet"}, {"prompt", "hi"}}, engine).lora, "poet");
  EXPECT_EQ(parse_completion_request({{"prompt", "hi"}}, engine).lora, "");
  try {
    parse_completion_request({{"model", "nope"}, {"prompt", "hi"}}, engine);
    FAIL() << "an unknown model must be refused";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "model");
    EXPECT_NE(std::string(e.what()).find("'poet'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gs
