// Jinja language features, with expected outputs checked against @huggingface/jinja by hand
// (node -e "new (require('@huggingface/jinja').Template)(src).render(ctx)").
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "core/check.h"

namespace moeserve::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::string R(const std::string& src, const ojson& ctx = ojson::object()) {
  return ChatTemplate::Parse(src).Render(ctx);
}

TEST(Jinja, TextAndWhitespaceControl) {
  EXPECT_EQ(R("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(R("{% if true %}\nx\n{% endif %}\ny\n"), "x\ny");  // trim_blocks + trailing \n dropped
  EXPECT_EQ(R("  {% if true %}x{% endif %}"), "x");            // lstrip_blocks
  EXPECT_EQ(R("  {{ 'x' }}"), "  x");                          // not for expressions
  EXPECT_EQ(R("a {#- c -#} b"), "ab");
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(R("a{% generation %}b{% endgeneration %}c"), "abc");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}"),
            "7|9|3|1|1024");
  EXPECT_EQ(R("{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 1.5 + 1 }}|{{ -3 }}|{{ - (2) }}"), "3.5|2.0|2.5|-3|-2");
  EXPECT_THROW(R("{{ 'a' ~ 1 ~ none }}"), Error);  // HF: no operations on none
}

TEST(Jinja, ConcatAndStrings) {
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ true }}|{{ 'a' + 'b' }}|{{ 'x' ~ undefined_var }}"), "a1true|ab|x");
  EXPECT_EQ(
      R("{{ 'ab' in 'cabd' }}|{{ 'z' not in 'abc' }}|{{ 1 in [1, 2] }}|{{ 'k' in {'k': 1} }}"),
      "true|true|true|true");
  EXPECT_EQ(R("{{ 'hello'[1:3] }}|{{ 'hello'[::-1] }}|{{ [1,2,3,4][-2:] }}|{{ 'abc'[-1] }}"),
            "el|olleh|[3, 4]|c");
  EXPECT_EQ(R("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b  c'.split() }}"),
            "a b|[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b\", \"c\"]");
  EXPECT_EQ(
      R("{{ 'a-b-c'.split('-', 1) }}|{{ 'x'.startswith(('a', 'x')) }}|{{ 'abc'.endswith('bc') }}"),
      "[\"a\", \"b-c\"]|true|true");
  EXPECT_EQ(R("{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello world'.title() }}|{{ 'hi'.upper() }}"),
            "bba|Hello World|HI");
}

TEST(Jinja, PrintingFollowsHuggingFace) {
  EXPECT_EQ(
      R("[{{ none }}][{{ undefined_var }}][{{ true }}][{{ [1, 'a', none] }}][{{ {'a': 1} }}]"),
      "[][][true][[1, \"a\", null]][{\"a\": 1}]");
  EXPECT_EQ(R("{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ 10 if false else 2.50 }}"),
            "1.0|0.30000000000000004|2.5");
  EXPECT_EQ(R("{{ x }}", {{"x", 2.0}}), "2");  // integral JSON numbers are integers
}

TEST(Jinja, IfForSetMacro) {
  EXPECT_EQ(R("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% "
              "endfor %}"),
            "11,22,33");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"), "2242");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(R("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
  EXPECT_EQ(R("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(R("{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "1");
  EXPECT_EQ(R("{% for x in 'ab' %}{{ loop.previtem }}{{ x }}{{ loop.revindex }}{% endfor %}"),
            "a2ab1");
  EXPECT_EQ(R("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
  EXPECT_EQ(R("{% if 0 %}a{% elif '' %}b{% elif [0] %}c{% else %}d{% endif %}"), "c");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}x{{ a }}{% endset %}{{ c }}"), "12x1");
  EXPECT_EQ(
      R("{% set ns = namespace(n=0) %}{% for x in [1,2] %}{% set ns.n = ns.n + x %}{% endfor %}"
        "{{ ns.n }}"),
      "3");
  // Loop scope: a plain set inside a loop does not leak out.
  EXPECT_EQ(R("{% set y = 0 %}{% for x in [1] %}{% set y = 5 %}{% endfor %}{{ y }}"), "0");
  EXPECT_EQ(R("{% macro f(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }}|{{ "
              "f(1, c=3) }}"),
            "1B|1B3");
  EXPECT_EQ(R("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}"),
            "[in]");
  EXPECT_EQ(R("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}"),
            "[1, 2]{\"k\": 3}");
  EXPECT_EQ(R("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(R("{{ 'y' if true else 'n' }}{{ 'y' if false else 'n' }}[{{ 'y' if false }}]"), "yn[]");
}

TEST(Jinja, Filters) {
  ojson ctx = ojson::parse(R"({"xs": [{"n": "b", "v": 2}, {"n": "a", "v": 1}, {"n": "c"}],
                               "d": {"z": 1, "a": {"b": [1, "é"]}}})");
  EXPECT_EQ(R("{{ xs | map(attribute='n') | join(',') }}", ctx), "b,a,c");
  EXPECT_EQ(R("{{ xs | selectattr('v') | map(attribute='n') | list | length }}", ctx), "2");
  EXPECT_EQ(R("{{ xs | rejectattr('v') | map(attribute='n') | first }}", ctx), "c");
  EXPECT_EQ(R("{{ xs | selectattr('n', 'equalto', 'a') | map(attribute='v') | first }}", ctx), "1");
  EXPECT_EQ(R("{{ xs | sort(attribute='n') | map(attribute='n') | join }}", ctx), "abc");
  EXPECT_EQ(R("{{ d | tojson }}", ctx), "{\"z\": 1, \"a\": {\"b\": [1, \"é\"]}}");
  EXPECT_EQ(R("{{ d | tojson(indent=2) }}", ctx),
            "{\n  \"z\": 1,\n  \"a\": {\n    \"b\": [\n      1,\n      \"é\"\n    ]\n  }\n}");
  EXPECT_EQ(R("{{ d | tojson(ensure_ascii=true, separators=(',', ':')) }}", ctx),
            "{\"z\":1,\"a\":{\"b\":[1,\"\\u00e9\"]}}");
  EXPECT_EQ(R("{{ d | dictsort | first | first }}|{{ d | items | list | length }}", ctx), "a|2");
  EXPECT_EQ(R("{{ [3, 1, 2] | sort | reverse | join('-') }}|{{ [1, 1, 2] | unique | list }}"),
            "3-2-1|[1, 2]");
  EXPECT_EQ(R("{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ 'x' | d('y') }}"),
            "dflt|e|x");
  EXPECT_EQ(R("{{ '42' | int + 1 }}|{{ '3.5x' | float }}|{{ 'x' | int(7) }}|{{ 3.9 | int }}"),
            "43|3.5|7|3");
  EXPECT_EQ(R("{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(R("{{ ' x ' | trim }}|{{ 'abc' | length }}|{{ 'hello' | capitalize }}|{{ -3 | abs }}"),
            "x|3|Hello|3");
  EXPECT_EQ(
      R("{{ [1, 2, 3] | sum }}|{{ [4, 2, 9] | max }}|{{ [4, 2, 9] | min }}|{{ 2.567 | round(1) }}"),
      "6|9|2|2.6");
  EXPECT_EQ(R("{{ '<a>' | escape }}|{{ 'one two' | wordcount }}|{{ [1,2,3] | count }}"),
            "&lt;a&gt;|2|3");
  EXPECT_EQ(R("{{ ['a', 'b'] | map('upper') | join }}|{{ [1, 2, 3, 4] | select('odd') | list }}"),
            "AB|[1, 3]");
}

TEST(Jinja, Tests) {
  ojson ctx = ojson::parse(
      R"({"s": "x", "n": 1, "f": 1.5, "l": [1], "m": {"a": 1}, "z": null, "b": true})");
  EXPECT_EQ(
      R("{{ s is string }}{{ n is number }}{{ n is integer }}{{ f is integer }}{{ l is iterable }}"
        "{{ m is mapping }}{{ z is none }}{{ b is boolean }}{{ q is defined }}{{ q is undefined }}",
        ctx),
      "truetruetruefalsetruetruetruetruefalsetrue");
  EXPECT_EQ(R("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'ab' is lower }}{{ 'AB' is "
              "upper }}"
              "{{ b is true }}{{ b is false }}{{ n is equalto 1 }}{{ 2 is in [1, 2] }}{{ m is "
              "sequence }}",
              ctx),
            "truetruetruetruetruetruefalsetruetruetrue");
  EXPECT_EQ(R("{{ range is callable }}{{ (1, 2) is iterable }}"), "truefalse");
}

TEST(Jinja, Globals) {
  EXPECT_EQ(R("{{ range(3) }}|{{ range(1, 7, 2) }}|{{ range(3, 0, -1) }}"),
            "[0, 1, 2]|[1, 3, 5]|[3, 2, 1]");
  EXPECT_EQ(R("{{ dict(a=1, b='x') }}"), "{\"a\": 1, \"b\": \"x\"}");
  EXPECT_EQ(R("{{ strftime_now('%Y') | length }}"), "4");
  EXPECT_EQ(R("{{ bos_token }}x", {{"bos_token", "<s>"}}), "<s>x");
  try {
    R("line1\n{{ raise_exception('bad input') }}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat template line 2: bad input");
  }
}

TEST(Jinja, UndefinedSemantics) {
  EXPECT_EQ(R("[{{ a }}][{{ a.b }}][{{ a.b.c }}][{{ (a or 'x') }}][{{ a is defined }}]"),
            "[][][][x][false]");
  EXPECT_EQ(R("{% if a %}t{% else %}f{% endif %}{% if not a %}!{% endif %}"), "f!");
  EXPECT_THROW(R("{{ a + 1 }}"), Error);
  EXPECT_THROW(R("{{ a() }}"), Error);
  EXPECT_THROW(R("{{ none[0] }}"), Error);
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  try {
    ChatTemplate::Parse("ok\n\n{% if %}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  for (const char* bad :
       {"{% for %}", "{{ 1 +", "{% if x %}", "{% endif %}", "{{ 'abc }}", "{% bogus %}", "{{ (1 }}",
        "{% macro m(a=1, b) %}{% endmacro %}", "{# open", "{{ x | }}"}) {
    EXPECT_THROW(ChatTemplate::Parse(bad), Error) << bad;
  }
}

TEST(Jinja, HostileTemplatesFailCleanly) {
  // Unbounded loops, recursion, string and list growth, and deep nesting all end in an Error.
  EXPECT_THROW(
      R("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}"),
      Error);
  EXPECT_THROW(R("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), Error);
  EXPECT_THROW(R("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
               Error);
  EXPECT_THROW(R("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l "
                 "%}{% endfor %}"),
               Error);
  EXPECT_THROW(R("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  EXPECT_THROW(R("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"), Error);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  EXPECT_THROW(R(chain + " }}"), Error);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(R(ifs), Error);
}

}  // namespace
}  // namespace moeserve::chat
