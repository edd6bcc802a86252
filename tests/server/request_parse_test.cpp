// Request validation: every bad field is a 400 that names the field.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace gs {
namespace {

using nlohmann::json;

std::string param_of(const json& body) {
  static test::FakeEngine engine;
  try {
    parse_completion_request(body, engine);
    return "ok";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), e.param() == "model" ? 404 : 400);  // an unknown model is vLLM's 404
    return e.param();
  }
}

TEST(RequestParse, ReadsSamplingFields) {
  test::FakeEngine engine;
  json body = {{"model", "fake"},
               {"prompt", "hello"},
               {"temperature", 0},
               {"top_p", 0.5},
               {"top_k", 7},
               {"min_p", 0.1},
               {"max_tokens", 9},
               {"stop", "x"},
               {"seed", 42},
               {"n", 2},
               {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5},
               {"repetition_penalty", 1.2},
               {"logprobs", 3},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  GenerationRequest r = parse_completion_request(body, engine);
  EXPECT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].size(), 5u);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.top_k, 7);
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.seed.value(), 42u);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.num_choices(), 2);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(RequestParse, PromptForms) {
  test::FakeEngine engine;
  EXPECT_EQ(parse_completion_request({{"prompt", {1, 2, 3}}}, engine).prompts.size(), 1u);
  EXPECT_EQ(parse_completion_request({{"prompt", {"ab", "cd"}}}, engine).prompts.size(), 2u);
  EXPECT_EQ(parse_completion_request({{"prompt", {{1, 2}, {3}}}}, engine).prompts.size(), 2u);
  // Default max_tokens is 16, capped by the context.
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}}, engine).params.max_tokens, 16);
}

TEST(RequestParse, NamesTheBadField) {
  EXPECT_EQ(param_of({{"prompt", "x"}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"temperature", 3}}), "temperature");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"top_p", 0}}), "top_p");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"top_k", -2}}), "top_k");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"max_tokens", 0}}), "max_tokens");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"max_tokens", 1.5}}), "max_tokens");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"max_tokens", 1000}}), "max_tokens");  // > context
  EXPECT_EQ(param_of({{"prompt", "x"}, {"max_tokens", 18446744073709551615ull}}), "max_tokens");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"n", 0}}), "n");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"n", 100}}), "n");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"stop", 5}}), "stop");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"stop", {"a", 1}}}), "stop");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logprobs", 21}}), "logprobs");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"presence_penalty", 2.5}}), "presence_penalty");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"ignore_eos", "yes"}}), "ignore_eos");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"model", "gpt-4"}}), "model");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"echo", "yes"}}), "echo");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logit_bias", 5}}), "logit_bias");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}), "logit_bias");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logit_bias", {{"5", 101}}}}), "logit_bias");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logit_bias", {{"-1", 1}}}}), "logit_bias");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"prompt_logprobs", 21}}), "prompt_logprobs");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}), "stream_options");
  EXPECT_EQ(param_of({{"prompt", ""}}), "prompt");
  EXPECT_EQ(param_of({{"prompt", json::array()}}), "prompt");
  EXPECT_EQ(param_of({{"prompt", {1, 999}}}), "prompt");  // outside the vocabulary
  EXPECT_EQ(param_of({{"prompt", {1, -1}}}), "prompt");
  EXPECT_EQ(param_of({{"prompt", 12}}), "prompt");
  EXPECT_EQ(param_of({{"prompt", std::string(200, 'x')}}), "prompt");  // longer than the context
  EXPECT_EQ(param_of(json::object()), "prompt");
}

TEST(RequestParse, ChatWithoutTemplateIsAClearError) {
  test::FakeEngine engine;
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  try {
    parse_chat_request(body, nlohmann::ordered_json::parse(body.dump()), engine, "");
    FAIL() << "expected an error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
}

TEST(RequestParse, ChatRendersTheTemplate) {
  test::FakeEngine engine;
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_completion_tokens", 5}};
  std::string tmpl =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  auto r = parse_chat_request(body, nlohmann::ordered_json::parse(body.dump()), engine, tmpl);
  std::string prompt(r.prompts[0].begin(), r.prompts[0].end());
  EXPECT_EQ(prompt, "<user>hi<assistant>");
  EXPECT_EQ(r.params.max_tokens, 5);
}

// The param a chat body is refused for ("ok" when accepted).
std::string chat_param_of(json body) {
  static test::FakeEngine engine;
  if (!body.contains("messages")) body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
  try {
    parse_chat_request(body, nlohmann::ordered_json::parse(body.dump()), engine, "{{ messages[0].content }}");
    return "ok";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find(e.param()), std::string::npos) << "the message names " << e.param();
    return e.param();
  }
}

TEST(RequestParse, KnownUnsupportedFieldsAre400NamingThem) {
  // Structured-output fields are served; malformed values are 400s naming them.
  for (const char* key : {"response_format", "guided_choice"}) {
    EXPECT_EQ(chat_param_of({{key, 7}}), key);
    EXPECT_EQ(param_of({{"prompt", "x"}, {key, 7}}), key);
  }
  EXPECT_EQ(chat_param_of({{"chat_template_kwargs", 7}}), "chat_template_kwargs");
  EXPECT_EQ(chat_param_of({{"chat_template_kwargs", {{"add_generation_prompt", false}}}}), "chat_template_kwargs");
  EXPECT_EQ(chat_param_of({{"chat_template_kwargs", {{"enable_thinking", false}}}}), "ok");
  EXPECT_EQ(chat_param_of({{"functions", {{{"name", "f"}}}}}), "functions");
  for (const char* key : {"include_stop_str_in_output", "continue_final_message"}) {
    EXPECT_EQ(chat_param_of({{key, true}}), key);
    EXPECT_EQ(chat_param_of({{key, false}}), "ok") << key << ": false is what we do";
  }
  EXPECT_EQ(chat_param_of({{"tool_choice", "none"}}), "ok");
  EXPECT_EQ(chat_param_of({{"response_format", nullptr}}), "ok");
  // Unknown fields are ignored (with a debug log line), as vLLM does.
  EXPECT_EQ(chat_param_of({{"some_future_field", 1}}), "ok");
  EXPECT_EQ(param_of({{"prompt", "x"}, {"some_future_field", 1}}), "ok");
}

// chat_template_kwargs reach the template as variables (Qwen3's enable_thinking is one).
TEST(RequestParse, ChatTemplateKwargsAreTemplateVariables) {
  test::FakeEngine engine;
  const std::string tmpl =
      "{{ messages[0].content }}{% if enable_thinking is defined and not enable_thinking %}"
      " /no_think{% endif %}";
  auto prompt_of = [&](json body) {
    body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
    auto r = parse_chat_request(body, nlohmann::ordered_json::parse(body.dump()), engine, tmpl);
    return std::string(r.prompts[0].begin(), r.prompts[0].end());
  };
  EXPECT_EQ(prompt_of(json::object()), "hi");
  EXPECT_EQ(prompt_of({{"chat_template_kwargs", {{"enable_thinking", false}}}}), "hi /no_think");
  EXPECT_EQ(prompt_of({{"chat_template_kwargs", {{"enable_thinking", true}}}}), "hi");
}

TEST(RequestParse, ChatRolesAndToolsAreValidated) {
  for (const char* role : {"system", "user", "assistant", "tool", "developer"})
    EXPECT_EQ(chat_param_of({{"messages", {{{"role", role}, {"content", "x"}}}}}), "ok") << role;
  for (const char* role : {"wizard", "", "USER"})
    EXPECT_EQ(chat_param_of({{"messages", {{{"role", role}, {"content", "x"}}}}}), "messages") << role;
  EXPECT_EQ(chat_param_of({{"tools", "search"}}), "tools");
  EXPECT_EQ(chat_param_of({{"tools", {{"type", "function"}}}}), "tools");  // an object, not a list
  EXPECT_EQ(chat_param_of({{"tools", {1}}}), "tools");
  EXPECT_EQ(chat_param_of({{"tools", json::array({{{"type", "function"}}})}}), "ok");
}

}  // namespace
}  // namespace gs
