// Every case of ../shared/golden/chat_templates/*.json (rendered by HF transformers) must
// render byte-for-byte the same through gs::ChatTemplate.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tokenizer/chat_template.h"

namespace gs {
namespace {

using nlohmann::ordered_json;

ordered_json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << "cannot open " << p;
  return ordered_json::parse(f);
}

// The `chat_template` of a tokenizer_config.json: a string, or a list of named templates.
std::string chat_template_of(const ordered_json& config) {
  const auto& t = config.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  for (const auto& named : t)
    if (named.at("name") == "default") return named.at("template").get<std::string>();
  ADD_FAILURE() << "no default chat template";
  return "";
}

class GoldenChatTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenChatTemplate, RendersEveryCaseExactly) {
  const ordered_json golden = read_json(test::golden_dir() / "chat_templates" / (GetParam() + ".json"));
  ASSERT_EQ(golden.at("format"), "chat-template-golden/1");
  // Paths in goldens are relative to the folder holding shared/.
  const auto config_path = test::shared_dir().parent_path() / golden.at("tokenizer_config").get<std::string>();
  const ChatTemplate tmpl(chat_template_of(read_json(config_path)));
  const ordered_json& special = golden.at("special_tokens");

  int passed = 0;
  const auto& cases = golden.at("cases");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("id").get<std::string>());
    const std::string rendered =
        tmpl.render(c.at("messages"), c.at("tools"), c.at("add_generation_prompt").get<bool>(), special);
    EXPECT_EQ(rendered, c.at("rendered").get<std::string>());
    passed += rendered == c.at("rendered").get<std::string>();
  }
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
  std::printf("[golden %s] %d/%zu cases match\n", GetParam().c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, GoldenChatTemplate,
                         ::testing::Values("llama3-8b-instruct", "qwen2.5-instruct", "mistral-7b-instruct-v0.3",
                                           "phi-3-mini-instruct"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace gs
