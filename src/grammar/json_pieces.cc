#include "grammar/json_pieces.h"

#include <algorithm>
#include <string>

namespace moeserve::grammar::json {
namespace {

Expr Digits(char lo, char hi) {
  return Expr::Class({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}});
}

// Equal-length digit strings, leading zeros allowed: every string between them.
Expr FixedRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Expr::Empty();
  if (lo == hi) return Expr::Literal(lo);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const std::string zeros(lo_rest.size(), '0'), nines(lo_rest.size(), '9');
  const char a = lo[0], b = hi[0];
  const int rest = static_cast<int>(lo_rest.size());
  if (a == b) return Expr::Seq({Expr::Literal(std::string(1, a)), FixedRange(lo_rest, hi_rest)});
  if (lo_rest == zeros && hi_rest == nines)
    return Expr::Seq({Digits(a, b), Expr::Repeat(Digits('0', '9'), rest, rest)});
  std::vector<Expr> alts;
  alts.push_back(Expr::Seq({Expr::Literal(std::string(1, a)), FixedRange(lo_rest, nines)}));
  if (b - a > 1)
    alts.push_back(Expr::Seq({Digits(a + 1, b - 1), Expr::Repeat(Digits('0', '9'), rest, rest)}));
  alts.push_back(Expr::Seq({Expr::Literal(std::string(1, b)), FixedRange(zeros, hi_rest)}));
  return Expr::Alt(std::move(alts));
}

uint64_t Pow10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

int NumDigits(uint64_t v) {
  return static_cast<int>(std::to_string(v).size());
}

// Non-negative integers in [lo, hi] without leading zeros; hi missing: any from lo on that has
// at most kMaxIntegerDigits digits.
Expr NonNegative(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<Expr> alts;
  const int lo_digits = NumDigits(lo);
  const int hi_digits = hi ? NumDigits(*hi) : std::min(lo_digits, kMaxIntegerDigits);
  for (int len = lo_digits; len <= hi_digits; ++len) {
    const uint64_t first = len == 1 ? 0 : Pow10(len - 1);
    const uint64_t last = len >= 20 ? UINT64_MAX : Pow10(len) - 1;
    const uint64_t a = std::max(lo, first), b = hi ? std::min(*hi, last) : last;
    if (a <= b) alts.push_back(FixedRange(std::to_string(a), std::to_string(b)));
  }
  if (!hi && hi_digits < kMaxIntegerDigits)  // every number with more digits, up to the bound
    alts.push_back(Expr::Seq(
        {Digits('1', '9'), Expr::Repeat(Digits('0', '9'), hi_digits, kMaxIntegerDigits - 1)}));
  return Expr::Alt(std::move(alts));
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

void AppendEscapedCodepoint(uint32_t cp, std::string& out) {
  static const char* kHex = "0123456789abcdef";
  switch (cp) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
  }
  if (cp < 0x20) {
    out += "\\u00";
    out += kHex[cp >> 4];
    out += kHex[cp & 15];
    return;
  }
  AppendUtf8(cp, out);
}

bool NeedsEscape(uint32_t cp) {
  return cp < 0x20 || cp == '"' || cp == '\\';
}

}  // namespace

Expr IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi)
    throw GrammarError(detail::Concat("no integer lies in [", *lo, ", ", *hi, "]"));
  std::vector<Expr> alts;
  if (!lo || *lo < 0) {  // negative numbers: "-" then magnitudes in [|min(hi,-1)|, |lo|]
    const uint64_t small = hi && *hi < 0 ? Magnitude(*hi) : 1;
    const std::optional<uint64_t> large =
        lo ? std::optional<uint64_t>(Magnitude(*lo)) : std::nullopt;
    alts.push_back(Expr::Seq({Expr::Literal("-"), NonNegative(small, large)}));
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    alts.push_back(NonNegative(from, hi ? std::optional<uint64_t>(*hi) : std::nullopt));
  }
  return Expr::Alt(std::move(alts));
}

namespace {

// Fraction digits (after the '.') with at least one that is not 0, kMaxFractionDigits at most:
// by the number z of leading zeros, 0{z} [1-9] [0-9]{0, max - z - 1}, nested as
// [1-9][0-9]{0,n-1} | 0 (...) so that each string matches one way only.
Expr NonZeroFraction() {
  Expr e = Digits('1', '9');  // n = 1
  for (int n = 2; n <= kMaxFractionDigits; ++n)
    e = Expr::Alt({Expr::Seq({Digits('1', '9'), Expr::Repeat(Digits('0', '9'), 0, n - 1)}),
                   Expr::Seq({Expr::Literal("0"), std::move(e)})});
  return e;
}

// Magnitudes m = i.f with a <= m <= b (strict where excluded); `b` missing: unbounded. Either
// the fraction is zero (integers i in the range, optionally ".000") or it is not (then any i with
// a <= i < b works, since a <= i < i.f < i + 1 <= b).
Expr Magnitudes(uint64_t a, bool a_excl, std::optional<uint64_t> b, bool b_excl) {
  std::vector<Expr> alts;
  const uint64_t int_lo = a + (a_excl ? 1 : 0);
  const std::optional<uint64_t> int_hi =
      b ? std::optional<uint64_t>(b_excl ? (*b == 0 ? 0 : *b - 1) : *b) : std::nullopt;
  const bool int_hi_valid = !b || !(b_excl && *b == 0);
  if (int_hi_valid && (!int_hi || int_lo <= *int_hi))
    alts.push_back(
        Expr::Seq({NonNegative(int_lo, int_hi),
                   Expr::Repeat(Expr::Seq({Expr::Literal("."), Expr::Repeat(Expr::Literal("0"), 1,
                                                                            kMaxFractionDigits)}),
                                0, 1)}));
  if (!b || (*b > 0 && a <= *b - 1))
    alts.push_back(Expr::Seq({NonNegative(a, b ? std::optional<uint64_t>(*b - 1) : std::nullopt),
                              Expr::Literal("."), NonZeroFraction()}));
  if (alts.empty()) throw GrammarError("no number lies in the range");
  return Expr::Alt(std::move(alts));
}

}  // namespace

Expr NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  if (lo && hi &&
      (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive))))
    throw GrammarError(detail::Concat("no number lies between ", lo->value, " and ", hi->value));
  std::vector<Expr> alts;
  if (!lo || lo->value < 0) {  // x < 0: "-" and a magnitude in (|hi| or 0, |lo|]
    const bool hi_negative = hi && hi->value < 0;
    const uint64_t small = hi_negative ? Magnitude(hi->value) : 0;
    const bool small_excl = hi_negative ? hi->exclusive : true;
    const std::optional<uint64_t> large =
        lo ? std::optional<uint64_t>(Magnitude(lo->value)) : std::nullopt;
    alts.push_back(
        Expr::Seq({Expr::Literal("-"), Magnitudes(small, small_excl, large, lo && lo->exclusive)}));
  }
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {  // x >= 0
    const bool lo_nonneg = lo && lo->value >= 0;
    alts.push_back(
        Magnitudes(lo_nonneg ? static_cast<uint64_t>(lo->value) : 0, lo_nonneg && lo->exclusive,
                   hi ? std::optional<uint64_t>(hi->value) : std::nullopt, hi && hi->exclusive));
  }
  return Expr::Alt(std::move(alts));
}

Expr AnyNumber() {
  const Expr fraction =
      Expr::Seq({Expr::Literal("."), Expr::Repeat(Digits('0', '9'), 1, kMaxFractionDigits)});
  const Expr exponent = Expr::Seq({Expr::Class({{'e', 'e'}, {'E', 'E'}}),
                                   Expr::Repeat(Expr::Class({{'+', '+'}, {'-', '-'}}), 0, 1),
                                   Expr::Repeat(Digits('0', '9'), 1, kMaxExponentDigits)});
  return Expr::Seq({Expr::Repeat(Expr::Literal("-"), 0, 1), NonNegative(0, std::nullopt),
                    Expr::Repeat(fraction, 0, 1), Expr::Repeat(exponent, 0, 1)});
}

Expr EscapeForJsonString(const Expr& e) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kLiteral: {
      std::string out;
      for (size_t i = 0; i < e.text.size();) {
        const auto c = static_cast<unsigned char>(e.text[i]);
        if (c < 0x80) {
          AppendEscapedCodepoint(c, out);
          ++i;
        } else {
          out += e.text[i++];
        }
      }
      return Expr::Literal(std::move(out));
    }
    case K::kClass: {
      // Resolve to positive ranges, then move '"', '\' and controls out into escapes.
      std::vector<CodepointRange> ranges = e.ranges;
      std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
      if (e.negated) {
        std::vector<CodepointRange> complement;
        uint32_t next = 0;
        for (const CodepointRange& r : ranges) {
          if (r.lo > next) complement.push_back({next, r.lo - 1});
          next = std::max(next, r.hi + 1);
        }
        if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
        ranges = std::move(complement);
      }
      std::vector<CodepointRange> safe;
      std::vector<Expr> alts;
      for (const CodepointRange& r : ranges) {
        uint32_t start = r.lo;
        for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x80; ++cp) {
          if (!NeedsEscape(cp)) continue;
          if (cp > start) safe.push_back({start, cp - 1});
          std::string esc;
          AppendEscapedCodepoint(cp, esc);
          alts.push_back(Expr::Literal(esc));
          start = cp + 1;
        }
        if (start <= r.hi) safe.push_back({start, r.hi});
      }
      if (!safe.empty()) alts.insert(alts.begin(), Expr::Class(std::move(safe)));
      if (alts.empty()) throw GrammarError("a character class matches no character");
      return Expr::Alt(std::move(alts));
    }
    case K::kSeq:
    case K::kAlt:
    case K::kRepeat: {
      Expr out = e;
      for (Expr& c : out.children) c = EscapeForJsonString(c);
      return out;
    }
    default:
      return e;
  }
}

Expr JsonStringChar() {
  return Expr::Alt(
      {Expr::Class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true),
       Expr::Seq(
           {Expr::Literal("\\"),
            Expr::Alt({Expr::Class({{'"', '"'},
                                    {'\\', '\\'},
                                    {'/', '/'},
                                    {'b', 'b'},
                                    {'f', 'f'},
                                    {'n', 'n'},
                                    {'r', 'r'},
                                    {'t', 't'}}),
                       Expr::Seq({Expr::Literal("u"),
                                  Expr::Repeat(Expr::Class({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}), 4,
                                               4)})})})});
}

std::string_view FormatRegex(std::string_view format) {
  static constexpr std::string_view kDate =
      "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]"
      "|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
  static constexpr std::string_view kTime =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):"
      "[0-5][0-9])";
  static const std::string kDateTime = std::string(kDate) + "T" + std::string(kTime);
  if (format == "date") return kDate;
  if (format == "time") return kTime;
  if (format == "date-time") return kDateTime;
  if (format == "uuid")
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  if (format == "email") {
    // Local part: RFC 5321's dot-atom (atext runs joined by single dots), 64 bytes at most.
    // Counting bytes across optional dots is not regular in a small way, so two shapes are
    // written: a run of 1-64 atext characters, or up to 32 atext characters with a dot allowed
    // between any two (63 bytes at most). Dotted local parts of more than 32 atext characters
    // are left out (a subset, as with the domain).
    static const std::string kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    static const std::string kEmail =
        "(?:" + kAtext + "{1,64}|" + kAtext + "(?:\\.?" + kAtext +
        "){0,31})@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,20}[A-Za-z0-9])?\\.){1,4}[A-Za-z]{2,6}";
    return kEmail;
  }
  if (format == "ipv4")
    return "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{"
           "2}|[1-9]?[0-9])";
  return "";
}

}  // namespace moeserve::grammar::json
