// Errors a server must turn into HTTP 400 (raise_exception, type errors, syntax errors with a
// location), and hostile templates/inputs that must fail cleanly instead of crashing or hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "render_helpers.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/globals.h"

namespace gs::jinja {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

// The message of the gs::Error that `fn` throws ("" and a test failure if none).
template <typename F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a gs::Error";
  return "";
}

std::string render_error(const std::string& src, const ordered_json& vars = ordered_json::object()) {
  return error_of([&] { test::render(src, vars); });
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplateMessageUnchanged) {
  const std::string src = "{% if messages|length == 0 %}{{ raise_exception('No messages given!') }}{% endif %}ok";
  EXPECT_EQ(render_error(src, {{"messages", ordered_json::array()}}), "No messages given!");
  EXPECT_THROW(test::render(src, {{"messages", ordered_json::array()}}), TemplateRaise);
  EXPECT_EQ(test::render(src, {{"messages", {1}}}), "ok");
}

TEST(JinjaErrors, ChatTemplateRaisesGsErrorForMistralRoleAlternation) {
  const ChatTemplate t(
      "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ m['content'] }}{% endfor %}");
  const auto bad = ordered_json::parse(R"([{"role":"assistant","content":"a"}])");
  EXPECT_EQ(error_of([&] { t.render(bad, nullptr, false, ordered_json::object()); }),
            "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(JinjaErrors, TypeErrorsNameTheTemplateLine) {
  const std::string msg = render_error("line one\n{{ 1 + 'a' }}");
  EXPECT_THAT(msg, HasSubstr("line 2"));
  EXPECT_THAT(msg, HasSubstr("unsupported operand type(s) for +: 'int' and 'str'"));
  EXPECT_THAT(render_error("{{ 'a' + 1 }}"), HasSubstr("can only concatenate str"));
  EXPECT_THAT(render_error("{{ 1 // 0 }}"), HasSubstr("division by zero"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 + 1 }}"), HasSubstr("integer overflow"));
  EXPECT_THAT(render_error("{{ 'a' < 1 }}"), HasSubstr("not supported between"));
  EXPECT_THAT(render_error("{{ 5() }}"), HasSubstr("not callable"));
  EXPECT_THAT(render_error("{% set x = 1 %}{% set x.a = 2 %}"), HasSubstr("namespace"));
}

TEST(JinjaErrors, StrictUsesOfUndefinedFail) {
  EXPECT_THAT(render_error("{{ missing.attr }}"), HasSubstr("'missing' is undefined"));
  EXPECT_THAT(render_error("{{ missing['k'] }}"), HasSubstr("'missing' is undefined"));
  EXPECT_THAT(render_error("{{ missing + 'x' }}"), HasSubstr("'missing' is undefined"));
  EXPECT_THAT(render_error("{{ d.a.b }}", {{"d", ordered_json::object()}}), HasSubstr("has no attribute 'a'"));
  EXPECT_THAT(render_error("{{ missing|tojson }}"), HasSubstr("not JSON serializable"));
  EXPECT_THAT(render_error("{{ missing() }}"), HasSubstr("'missing' is undefined"));
}

TEST(JinjaSyntax, ErrorsNameLineAndColumn) {
  EXPECT_THAT(error_of([] { Template("a\nb {{ x "); }), HasSubstr("line 2, column 3"));
  EXPECT_THAT(error_of([] { Template("{% for x in xs %}\n{{ x }}"); }), HasSubstr("missing '{% endfor %}'"));
  EXPECT_THAT(error_of([] { Template("ok\n\n  {% endif %}"); }), HasSubstr("line 3"));
  EXPECT_THAT(error_of([] { Template("{% frobnicate %}"); }), HasSubstr("unknown or unsupported tag 'frobnicate'"));
  EXPECT_THAT(error_of([] { Template("{{ x | nosuchfilter }}"); }), HasSubstr("no filter named 'nosuchfilter'"));
  EXPECT_THAT(error_of([] { Template("{% if x is nosuchtest %}{% endif %}"); }), HasSubstr("no test named"));
  EXPECT_THAT(error_of([] { Template("{{ 'unterminated }}"); }), HasSubstr("unterminated string"));
  EXPECT_THAT(error_of([] { Template("{# never closed"); }), HasSubstr("unterminated comment"));
  EXPECT_THAT(error_of([] { Template("{{ (1 + }}"); }), HasSubstr("line 1"));
  EXPECT_THAT(error_of([] { Template("{% break %}"); }), HasSubstr("outside of a for loop"));
  EXPECT_THAT(error_of([] { Template("{% raw %}no end"); }), HasSubstr("endraw"));
  EXPECT_THAT(error_of([] { ChatTemplate("{% if %}"); }), HasSubstr("syntax error at line 1"));
}

TEST(JinjaLimits, DeepExpressionNestingIsASyntaxErrorNotACrash) {
  const int n = 100000;
  EXPECT_THAT(error_of([&] { Template("{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}"); }),
              HasSubstr("nested deeper"));
  EXPECT_THAT(error_of([&] { Template("{{ " + std::string(n, '[') + std::string(n, ']') + " }}"); }),
              HasSubstr("nested deeper"));
  std::string chain = "{{ 1";
  for (int i = 0; i < n; ++i) chain += "+1";
  EXPECT_THAT(error_of([&] { Template(chain + " }}"); }), HasSubstr("nested deeper"));
  std::string nots = "{{ ";
  for (int i = 0; i < n; ++i) nots += "not ";
  EXPECT_THAT(error_of([&] { Template(nots + "1 }}"); }), HasSubstr("nested deeper"));
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(error_of([&] { Template{ifs}; }), HasSubstr("nested deeper"));
  // Moderate nesting is fine.
  EXPECT_EQ(test::render("{{ " + std::string(50, '(') + "7" + std::string(50, ')') + " }}"), "7");
}

TEST(JinjaLimits, RunawayRenderingStopsWithAnError) {
  EXPECT_THAT(render_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
              HasSubstr("macro calls nested deeper"));
  EXPECT_THAT(render_error("{% for i in range(1000000) %}{% endfor %}"), HasSubstr("range too big"));
  EXPECT_THAT(render_error("{{ 'x' * 1000000000 }}"), HasSubstr("too large"));
  EXPECT_THAT(render_error("{{ 2 ** 100 }}"), HasSubstr("integer overflow"));
  EXPECT_EQ(test::render("{{ (-1) ** 1000000000000000000 }}"), "1");  // square-and-multiply, no loop
  RenderLimits small;
  small.max_loop_iterations = 1000;
  const Template nested("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}");
  EXPECT_THAT(error_of([&] { nested.render({}, small); }), HasSubstr("more than 1000 iterations"));
  small.max_output_bytes = 100;
  EXPECT_THAT(error_of([&] { Template("{% for i in range(50) %}abcd{% endfor %}").render({}, small); }),
              HasSubstr("exceeds 100 bytes"));
}

TEST(JinjaLimits, DeeplyNestedInputsAreRejectedCleanly) {
  ordered_json deep = "x";
  for (int i = 0; i < 100000; ++i) {
    ordered_json wrap = ordered_json::array();
    wrap.push_back(std::move(deep));
    deep = std::move(wrap);
  }
  const ChatTemplate t("{{ messages|tojson }}");
  EXPECT_THAT(error_of([&] { t.render(deep, nullptr, false, ordered_json::object()); }),
              HasSubstr("nested too deeply"));
  // Structures a template builds itself are bounded when printed.
  EXPECT_THAT(render_error("{% set ns = namespace(x=1) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                           "{{ ns.x|tojson }}"),
              HasSubstr("nested deeper than"));
}

TEST(JinjaLimits, BadMessagesShapeIsAnError) {
  const ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_THAT(error_of([&] { t.render(ordered_json::object(), nullptr, false, ordered_json::object()); }),
              HasSubstr("must be a JSON array"));
  // Messages that are not objects: attribute lookups are undefined, so this renders nothing.
  EXPECT_EQ(t.render(ordered_json::parse("[1, \"s\", null]"), nullptr, false, ordered_json::object()), "");
}

}  // namespace
}  // namespace gs::jinja
