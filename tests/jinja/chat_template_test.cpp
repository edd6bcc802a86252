// gs::ChatTemplate's rendering environment: the variables HF passes and how it passes them.
#include <gtest/gtest.h>

#include <ctime>

#include "tokenizer/chat_template.h"

namespace gs {
namespace {

using nlohmann::ordered_json;

const ordered_json kUser = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");

TEST(ChatTemplate, SpecialTokensSetAreStringsAndUnsetAreUndefined) {
  const ChatTemplate t("[{{ bos_token }}][{{ eos_token }}][{{ unk_token is defined }}][{{ pad_token is defined }}]");
  const auto special = ordered_json::parse(R"({"bos_token": "<s>", "eos_token": "</s>", "unk_token": null})");
  EXPECT_EQ(t.render(kUser, nullptr, false, special), "[<s>][</s>][False][False]");
}

TEST(ChatTemplate, ToolsAndDocumentsAreNoneWhenNotGiven) {
  const ChatTemplate t(
      "{{ tools is defined }} {{ tools is none }} {{ documents is none }}{% if tools %} {{ tools|length }}{% endif %}");
  EXPECT_EQ(t.render(kUser, nullptr, false, ordered_json::object()), "True True True");
  EXPECT_EQ(t.render(kUser, ordered_json::parse(R"([{"type": "function"}])"), false, ordered_json::object()),
            "True False True 1");
}

TEST(ChatTemplate, AddGenerationPromptFlag) {
  const ChatTemplate t("{{ messages[0].content }}{% if add_generation_prompt %}<gen>{% endif %}");
  EXPECT_EQ(t.render(kUser, nullptr, true, ordered_json::object()), "hi<gen>");
  EXPECT_EQ(t.render(kUser, nullptr, false, ordered_json::object()), "hi");
}

TEST(ChatTemplate, KeepsObjectKeyOrderForTojsonAndItems) {
  const ChatTemplate t("{{ messages[0]|tojson }}|{% for k, v in messages[0].items() %}{{ k }}{% endfor %}");
  const auto msgs = ordered_json::parse(R"([{"role": "user", "content": "x", "b": 1, "a": 2}])");
  EXPECT_EQ(t.render(msgs, nullptr, false, ordered_json::object()),
            R"({"role": "user", "content": "x", "b": 1, "a": 2}|rolecontentba)");
  // The nlohmann::json overload works too, with that type's sorted keys.
  EXPECT_EQ(t.render(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"), nlohmann::json(), false,
                     nlohmann::json::object()),
            R"({"content": "x", "role": "user"}|contentrole)");
}

TEST(ChatTemplate, HfGenerationBlockRendersItsBody) {
  const ChatTemplate t("{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}");
  EXPECT_EQ(t.render(kUser, nullptr, false, ordered_json::object()), "[hi]");
}

// The C library's own formatting of the local time, taken before and after the render (the
// date may turn between them).
std::string local_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[128];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

TEST(ChatTemplate, StrftimeNowFormatsTheCurrentDate) {
  // Llama 3.1's "%d %b %Y" and an ISO date with the weekday.
  const ChatTemplate t("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %A') }}");
  const char* expected = "%d %b %Y|%Y-%m-%d %A";
  const std::string before = local_now(expected);
  const std::string got = t.render(kUser, nullptr, false, ordered_json::object());
  const std::string after = local_now(expected);
  EXPECT_TRUE(got == before || got == after) << got << " vs " << before;
}

TEST(ChatTemplate, ContentListsAndToolCallsAsRealTemplatesUseThem) {
  // Multimodal-style content arrays and tool_calls with dict arguments, as in Qwen/Llama-3.1 templates.
  const ChatTemplate t(
      "{%- for m in messages %}"
      "{%- if m.content is string %}{{ m.content }}"
      "{%- else %}{% for part in m.content if part.type == 'text' %}{{ part.text }}{% endfor %}{% endif %}"
      "{%- for tc in m.tool_calls|default([]) %}<{{ tc.function.name }} {{ tc.function.arguments|tojson }}>{% endfor %}"
      "{%- endfor %}");
  const auto msgs = ordered_json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "é": [true]}}}]}
  ])");
  EXPECT_EQ(t.render(msgs, nullptr, false, ordered_json::object()), R"(ab<f {"x": 1, "é": [true]}>)");
}

}  // namespace
}  // namespace gs
