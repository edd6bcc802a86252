// Untrusted bodies: depth, UTF-8, overflow and shape checks answer 400 with a clear message.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/openai_response.h"

namespace gs {
namespace {

int status_of(const std::string& body) {
  try {
    parse_json_body(body, 8);
    return 200;
  } catch (const ApiError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    return e.status();
  }
}

TEST(JsonBody, AcceptsObjectsWithinTheDepthLimit) {
  EXPECT_EQ(status_of(R"({"a": [[[[1]]]], "s": "[[[[[[[[[[[["})"), 200);  // brackets in strings don't count
}

TEST(JsonBody, RejectsHostileBodies) {
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of("[1]"), 400);
  EXPECT_EQ(status_of("\"x\""), 400);
  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of(std::string(100, '[')), 400);
  EXPECT_EQ(status_of(R"({"a":[[[[[[[[[[1]]]]]]]]]]})"), 400);
  EXPECT_EQ(status_of("{\"a\": \"\xff\xfe\"}"), 400);      // invalid UTF-8
  EXPECT_EQ(status_of("{\"a\": \"\xed\xa0\x80\"}"), 400);  // a UTF-16 surrogate in UTF-8
  EXPECT_EQ(status_of(R"({"a": 1e999})"), 400);            // overflows a double
  EXPECT_EQ(status_of(R"({"a": 1} trailing)"), 400);
}

TEST(JsonBody, ErrorObjectHasOpenAIShape) {
  ApiError e(400, "bad temperature", "temperature");
  auto j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "bad temperature");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(Sse, EventFraming) {
  EXPECT_EQ(sse_event({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // Invalid UTF-8 in generated text is replaced, never thrown.
  EXPECT_NO_THROW(sse_event({{"text", std::string("\xff")}}));
  EXPECT_EQ(new_response_id(ApiKind::Completion).rfind("cmpl-", 0), 0u);
  EXPECT_EQ(new_response_id(ApiKind::Chat).rfind("chatcmpl-", 0), 0u);
}

}  // namespace
}  // namespace gs
