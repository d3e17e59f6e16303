// Unit tests of the API-key check (SHA-256 against the FIPS 180-4 examples, the Bearer match,
// the public-route list), the stop-string matcher the engine thread runs, and the request limits.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/api_key.h"
#include "server/request_limits.h"
#include "server/route_table.h"
#include "server/sha256.h"
#include "server/stop_matcher.h"

namespace moeserve::server {
namespace {

std::string Hex(const Sha256Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Hex(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding needs a second block.
  EXPECT_EQ(Hex(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hex(Sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ApiKey, OnlyTheExactBearerHeaderMatches) {
  EXPECT_TRUE(AuthorizationMatches("Bearer sk-1", "sk-1"));
  EXPECT_FALSE(AuthorizationMatches("Bearer sk-1x", "sk-1"));
  EXPECT_FALSE(AuthorizationMatches("Bearer sk-", "sk-1"));
  EXPECT_FALSE(AuthorizationMatches("sk-1", "sk-1"));
  EXPECT_FALSE(AuthorizationMatches("", "sk-1"));
  EXPECT_FALSE(AuthorizationMatches("bearer sk-1", "sk-1"));
}

TEST(ApiKey, OnlyProbesArePublic) {
  for (const char* p : {"/health", "/metrics", "/version"}) EXPECT_TRUE(IsPublicRoute(p)) << p;
  for (const char* p :
       {"/tokenize", "/detokenize", "/v1/models", "/v1/completions", "/health/x", "/", "/anything"})
    EXPECT_FALSE(IsPublicRoute(p)) << p;
}

TEST(RequestLimits, OverTheLimitNamesTheFlag) {
  EXPECT_NO_THROW(CheckLimit(5, 5, "things", "max-things", "t"));
  try {
    CheckLimit(6, 5, "things", "max-things", "t");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("--max-things"), std::string::npos) << e.what();
    EXPECT_EQ(e.ToJson()["error"]["param"], "t");
  }
  EXPECT_TRUE(IsReservedTemplateVariable("messages"));
  EXPECT_TRUE(IsReservedTemplateVariable("add_generation_prompt"));
  EXPECT_FALSE(IsReservedTemplateVariable("enable_thinking"));
}

StopMatcher Matcher(std::vector<std::string> stops) {
  return StopMatcher(std::make_shared<const StopPatterns>(std::move(stops)));
}

TEST(StopMatcher, FindsStopsAcrossFeedsAndHoldsBackPrefixes) {
  StopMatcher m = Matcher({"aab", "xyz"});
  EXPECT_FALSE(m.Feed("qaa"));
  EXPECT_EQ(m.HeldBack(), 2u);  // "aa" may still become "aab"
  EXPECT_FALSE(m.Feed("a"));
  EXPECT_EQ(m.HeldBack(), 2u);  // "aaa": only the last two can
  auto hit = m.Feed("bcc");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->stop_index, 0u);
  EXPECT_EQ(hit->end, 1u);

  StopMatcher n = Matcher({"xyz"});
  EXPECT_FALSE(n.Feed("xy"));
  EXPECT_EQ(n.HeldBack(), 2u);
  EXPECT_FALSE(n.Feed("q"));
  EXPECT_EQ(n.HeldBack(), 0u);
}

TEST(StopMatcher, TheLongestStopWinsWhenSeveralEndTogether) {
  StopMatcher m = Matcher({"c", "abc", "bc"});
  auto hit = m.Feed("zabcd");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->stop_index, 1u);
  EXPECT_EQ(hit->end, 4u);
}

TEST(StopMatcher, AgreesWithANaiveSearchOnRandomText) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> stops;
    for (int k = 0; k < 3; ++k) {
      std::string s;
      for (int i = 0, len = 1 + int(rng() % 4); i < len; ++i) s += char('a' + rng() % 2);
      stops.push_back(s);
    }
    std::string text;
    for (int i = 0; i < 30; ++i) text += char('a' + rng() % 2);
    // Naive: the first end position where some stop string ends.
    size_t naive_end = std::string::npos;
    for (size_t e = 1; e <= text.size() && naive_end == std::string::npos; ++e)
      for (const auto& s : stops)
        if (s.size() <= e && text.compare(e - s.size(), s.size(), s) == 0) naive_end = e;
    StopMatcher m = Matcher(stops);
    size_t fed = 0;
    std::optional<StopMatcher::Hit> hit;
    while (fed < text.size() && !hit) {
      const size_t chunk = std::min<size_t>(1 + rng() % 3, text.size() - fed);
      hit = m.Feed(std::string_view(text).substr(fed, chunk));
      if (hit) hit->end += fed;
      fed += chunk;
    }
    ASSERT_EQ(hit ? hit->end : std::string::npos, naive_end) << text;
  }
}

}  // namespace
}  // namespace moeserve::server
