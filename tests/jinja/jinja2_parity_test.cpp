// Engine behaviour checked against Jinja2 itself: each expected string below is what Jinja2
// 3.1.6 renders for the template with HF's settings (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, non-escaping tojson).
#include <gtest/gtest.h>

#include "render_helpers.h"

namespace gs::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* vars;  // JSON object
  const char* expected;
};

const Case kCases[] = {
    {"arith_precedence", R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 10 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }})J",
     R"J({})J", R"J(7 9 1024 4 5)J"},
    {"int_division_python_semantics",
     R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }})J", R"J({})J",
     R"J(3 -4 1 2 3.5 2.0)J"},
    {"float_repr",
     R"J({{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 3.0 / 1e5 }} {{ 1e16 }} {{ 123456789.125 }})J",
     R"J({})J", R"J(2.5 0.30000000000000004 1e+20 1.0 3e-05 1e+16 123456789.125)J"},
    {"concat_and_str", R"J({{ 'a' ~ 1 ~ none ~ true ~ 2.50 }} {{ 'ab' * 3 }} {{ none }} {{ false }})J", R"J({})J",
     R"J(a1NoneTrue2.5 ababab None False)J"},
    {"and_or_return_operands",
     R"J({{ 1 < 2 and 'x' or 'y' }} {{ 0 or '' or 'z' }} {{ not 0 }} {{ [] or 'empty' }} {{ 'a' and 0 }})J", R"J({})J",
     R"J(x z True empty 0)J"},
    {"membership", R"J({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'z' in d }})J",
     R"J({"d": {"z": 1}})J", R"J(True True True True True)J"},
    {"comparisons",
     R"J({{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 3 }} {{ none == none }} {{ 'a' != 'a' }} {{ x == y }})J",
     R"J({"x": {"a": [1]}, "y": {"a": [1]}})J", R"J(True True True False True False True)J"},
    {"ternary", R"J({{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'only' if false }}])J",
     R"J({"x": "", "y": [0]})J", R"J(no yes [])J"},
    {"repr_of_containers",
     R"J({{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ {'a': 1, 'b': "it's"} }} {{ ['q"', "x'y", 'back\\slash\n'] }})J",
     R"J({})J", R"J([1, 'a', None, True, 1.5, {'k': [2]}] {'a': 1, 'b': "it's"} ['q"', "x'y", 'back\\slash\n'])J"},
    {"subscripts_and_slices",
     R"J({{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[1:3] }} {{ xs[10:] }} {{ xs.0 }})J",
     R"J({"xs": [1, 2, 3, 4]})J", R"J(1 4 [2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] [2, 3] [] 1)J"},
    {"unicode_strings", R"J({{ s[1:3] }} {{ s|length }} {{ s[-1] }} {{ s|upper }} {{ s[::-1] }} {{ s|reverse }})J",
     R"J({"s": "ünï✓"})J", R"J(nï 4 ✓ ÜNÏ✓ ✓ïnü ✓ïnü)J"},
    {"attribute_access",
     R"J({{ d.a }} {{ d['a'] }} [{{ d.missing }}] {{ d.missing is defined }} {{ d.nested.k }} {{ d['nested']['k'] }})J",
     R"J({"d": {"a": 1, "nested": {"k": "v"}}})J", R"J(1 1 [] False v v)J"},
    {"dict_methods",
     R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys()|list|join(',') }} {{ d.values()|list }} {{ d.get('b') }} {{ d.get('zz', 5) }} {{ d.get('zz') }})J",
     R"J({"d": {"b": 2, "a": 1}})J", R"J(b=2;a=1; b,a [2, 1] 2 5 None)J"},
    {"string_methods",
     R"J({{ '  hi  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'hello wORLD'.title() }}|{{ 'ABC'.lower() }}|{{ 'abc'.upper() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ '{} and {name}'.format(1, name='x') }}|{{ 'hello'.capitalize() }}|{{ '-'.join(['a', 'b']) }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.count('b') }})J",
     R"J({})J",
     R"J(hi|hi|a|a|True|True|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|Hello World|abc|ABC|bba|1 and x|Hello|a-b|1|2)J"},
    {"filters_strings",
     R"J([{{ '  x \n'|trim }}] {{ 'ab'|upper }} {{ 'AB'|lower }} {{ 'a b'|title }} {{ 'abc'|replace('b', 'X') }} {{ 'abc'|length }} {{ 42|string ~ '!' }} {{ 'xxaxx'|trim('x') }})J",
     R"J({})J", R"J([x] AB ab A B aXc 3 42! a)J"},
    {"filters_numbers",
     R"J({{ '42'|int + 1 }} {{ 'x'|int }} {{ 3.9|int }} {{ '3.5'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(0, 16) }} {{ '2.5'|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 2.1|round(0, 'ceil') }})J",
     R"J({})J", R"J(43 0 3 3 7 26 2.5 3 2.57 2.0 3.0)J"},
    {"filter_default",
     R"J({{ u|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ 0|d('zero', true) }} {{ 'set'|default('no') }})J",
     R"J({})J", R"J(dflt e None zero set)J"},
    {"filters_sequences",
     R"J({{ [1, 2, 3]|join(', ') }} {{ xs|first }} {{ xs|last }} {{ 'abc'|first }} {{ xs|length }} {{ xs|list }} {{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'a']|unique|list }} {{ [1, 2, 3]|sum }} {{ [4, 2, 8]|max }} {{ [4, 2, 8]|min }} {{ xs|reverse|list }})J",
     R"J({"xs": [5, 6, 7]})J", R"J(1, 2, 3 5 7 a 3 [5, 6, 7] [1, 2, 3] [3, 2, 1] ['b', 'A'] 6 8 2 [7, 6, 5])J"},
    {"filters_items",
     R"J({% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}{% for k, v in d|dictsort %}{{ k }}{% endfor %})J",
     R"J({"d": {"b": 1, "a": 2}})J", R"J(b:1 a:2 ab)J"},
    {"selectattr_map",
     R"J({{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('|') }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }} {{ msgs|map(attribute='role')|unique|list }} {{ msgs|selectattr('content')|list|length }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ ['a', 'b']|map('upper')|list }} {{ msgs|map(attribute='missing', default='-')|join }})J",
     R"J({"msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]})J",
     R"J(U1|U2 2 ['system', 'user', 'assistant'] 4 [1, 3] [1, 3] ['A', 'B'] ----)J"},
    {"tojson_compact",
     R"J({{ d|tojson }} {{ 'é"\\\n\u0001\t'|tojson }} {{ [1.0, 2.5e-7, 1e22, -0.0]|tojson }} {{ none|tojson }})J",
     R"J({"d": {"b": 1, "a": [1, 2.5, null, true], "u": "ünï ✓ 你好", "e": {}, "l": []}})J",
     R"J({"b": 1, "a": [1, 2.5, null, true], "u": "ünï ✓ 你好", "e": {}, "l": []} "é\"\\\n\u0001\t" [1.0, 2.5e-07, 1e+22, -0.0] null)J"},
    {"tojson_indent_and_sort",
     R"J({{ d|tojson(indent=2) }}
{{ d|tojson(sort_keys=true) }}
{{ []|tojson(indent=2) }}{{ {}|tojson(indent=4) }})J",
     R"J({"d": {"b": 1, "a": [1, {"x": null}], "e": {}}})J",
     R"J({
  "b": 1,
  "a": [
    1,
    {
      "x": null
    }
  ],
  "e": {}
}
{"a": [1, {"x": null}], "b": 1, "e": {}}
[]{})J"},
    {"tests",
     R"J({{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 1 is number }} {{ true is boolean }} {{ 1 is integer }} {{ 1.5 is float }} {{ 'a' is sequence }} {{ x is not none }} {{ 2 is in [1, 2] }} {{ 'ab' is lower }} {{ 3 is gt 2 }} {{ none is sameas none }} {{ range is callable }})J",
     R"J({"x": 1})J",
     R"J(True True True True True True True True True True True True True True True True True True True True)J"},
    {"loop_variables",
     R"J({% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.revindex }}/{{ loop.revindex0 }};{% endfor %})J",
     R"J({"xs": ["a", "b", "c"]})J", R"J(1/0/True/False/3/3/2;2/1/False/False/3/2/1;3/2/False/True/3/1/0;)J"},
    {"loop_prev_next_cycle",
     R"J({% for x in xs %}{{ loop.previtem|default('^') }}{{ x }}{{ loop.nextitem|default('$') }}{{ loop.cycle('o', 'e') }} {% endfor %})J",
     R"J({"xs": ["a", "b", "c"]})J", R"J(^abo abce bc$o )J"},
    {"loop_filter_counts_filtered",
     R"J({% for x in xs if x is odd %}{{ loop.index }}:{{ x }}/{{ loop.length }} {% endfor %})J",
     R"J({"xs": [1, 2, 3, 4, 5]})J", R"J(1:1/3 2:3/3 3:5/3 )J"},
    {"loop_else", R"J({% for x in [] %}a{% else %}empty{% endfor %} {% for x in [1] %}one{% else %}empty{% endfor %})J",
     R"J({})J", R"J(empty one)J"},
    {"break_continue",
     R"J({% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     R"J({"xs": [1, 2, 3, 4, 5]})J", R"J(13)J"},
    {"nested_loops_shadow_loop",
     R"J({% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ b }}{% endfor %}-{{ loop.index }}{{ a }}|{% endfor %})J",
     R"J({})J", R"J(1324-11|1324-22|)J"},
    {"loop_over_dict_and_string", R"J({% for k in d %}{{ k }}{% endfor %} {% for c in 'héllo' %}{{ c }}.{% endfor %})J",
     R"J({"d": {"x": 1, "y": 2}})J", R"J(xy h.é.l.l.o.)J"},
    {"set_is_scoped_to_loop",
     R"J({% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set x = 3 %}{% endif %}{{ x }})J",
     R"J({})J", R"J(213)J"},
    {"namespace",
     R"J({% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}{% set ns2 = namespace() %}{% set ns2.flag = true %} {{ ns2.flag }})J",
     R"J({})J", R"J(10 01234 True)J"},
    {"range", R"J({{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }})J", R"J({})J",
     R"J([0, 1, 2] [1, 3, 5] [5, 3, 1])J"},
    {"if_elif_else",
     R"J({% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %})J",
     R"J({})J", R"J(one two many )J"},
    {"set_block_and_unpack",
     R"J({% set t %}a{{ 1 }}b{% endset %}[{{ t }}]{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }})J",
     R"J({})J", R"J([a1b]1234)J"},
    {"macros",
     R"J({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C') }}{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %} {{ f(3) }})J",
     R"J({})J", R"J(Hi A! Hi B? Hi C! 321)J"},
    {"whitespace_control_dash",
     R"J(a  {%- if true -%}  b  {%- endif -%}  c|  {{- ' x ' -}}  |
  {{- 1 }}
|{{ 2 -}}

  |)J",
     R"J({})J",
     R"J(abc| x |1
|2|)J"},
    {"trim_and_lstrip_blocks",
     R"J(<ul>
  {% for x in xs %}
  <li>{{ x }}</li>
  {% endfor %}
</ul>
  {% if true %}
yes
  {% endif %}
end)J",
     R"J({"xs": [1, 2]})J",
     R"J(<ul>
  <li>1</li>
  <li>2</li>
</ul>
yes
end)J"},
    {"lstrip_plus_disables",
     R"J(  {%+ if true %}x{% endif %}|
  {% if true +%}
y{% endif %})J",
     R"J({})J",
     R"J(  x|

y)J"},
    {"comments",
     R"J(a {# comment #}
b
  {# own line #}
c{#- strip -#}  d)J",
     R"J({})J",
     R"J(a b
cd)J"},
    {"raw_block",
     R"J({% raw %}{{ not parsed }} {% if %}{% endraw %}|
  {% raw %}
x{% endraw %})J",
     R"J({})J",
     R"J({{ not parsed }} {% if %}|

x)J"},
    {"trailing_newline_dropped",
     R"J(hi
)J",
     R"J({})J", R"J(hi)J"},
    {"crlf_normalized",
     R"J(a
b{% if true %}
c{% endif %})J",
     R"J({})J",
     R"J(a
bc)J"},
    {"string_escapes", R"J({{ 'a\nb\t\u00e9\x41\'' }}|{{ "q\"q" }}|{{ 'adj' 'acent' }})J", R"J({})J",
     R"J(a
b	éA'|q"q|adjacent)J"},
    {"filter_block", R"J({% filter upper %}abc{{ 'd' }}{% endfilter %})J", R"J({})J", R"J(ABCD)J"},
    {"undefined_is_lenient",
     R"J([{{ nope }}]{{ nope|length }}{% for x in nope %}x{% endfor %}{{ nope is defined }}{{ nope|default('D') }}{{ nope == nope }}{{ 'a' in nope }}[{{ nope|trim }}][{{ nope|string }}]{% if not nope %}F{% endif %})J",
     R"J({})J", R"J([]0FalseDTrueFalse[][]F)J"},
    {"indent_filter",
     R"J({{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(1, blank=true) }})J", R"J({})J",
     R"J(a
  b

  c|  a
  b|a
 
 b)J"},
    {"messages_style",
     R"J({% for m in messages %}{% if m.role == 'system' %}<<{{ m.content }}>>{% elif loop.last %}{{ m.role|upper }}: {{ m['content']|trim }}{% else %}{{ m.role }}: {{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %})J",
     R"J({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}], "add_generation_prompt": true})J",
     R"J(<<S>>user: U1
assistant: A1
USER: U2ASSISTANT:)J"},
    {"dict_literal_and_list_concat", R"J({{ {'a': 1, 'b': 2}['b'] }} {{ ([1] + [2, 3])|length }} {{ {'k': 'v'}.k }})J",
     R"J({})J", R"J(2 3 v)J"},
    {"is_none_vs_undefined", R"J({{ x is none }} {{ x is defined }} {{ y is none }} {{ y is defined }} {{ x }})J",
     R"J({"x": null})J", R"J(True True False False None)J"},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class JinjaMatchesJinja2 : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaMatchesJinja2, Renders) {
  const Case& c = GetParam();
  EXPECT_EQ(test::render(c.source, nlohmann::ordered_json::parse(c.vars)), c.expected) << "template: " << c.source;
}

INSTANTIATE_TEST_SUITE_P(Engine, JinjaMatchesJinja2, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gs::jinja
