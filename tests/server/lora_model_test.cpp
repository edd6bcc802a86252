// LoRA adapters by name in "model": the base name and every served adapter are accepted (the
// request carries the adapter), anything else is vLLM's 404: "The model `X` does not exist.",
// type NotFoundError, code 404.
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
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.to_json(), json::parse(R"({"error": {"message": "The model `nope` does not exist.",
                                          "type": "NotFoundError", "param": "model", "code": 404}})"));
  }
  try {
    const json chat = {{"model", "sq"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    parse_chat_request(chat, nlohmann::ordered_json::parse(chat.dump()), engine, "");
    FAIL() << "an unknown model must be refused in chat too";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_STREQ(e.what(), "The model `sq` does not exist.");
  }
}

}  // namespace
}  // namespace gs
