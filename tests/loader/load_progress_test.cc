// Loading progress counts bytes and completed shards, reports each 10% once in log mode, and ends
// at 100% whatever was counted.
#include "loader/load_progress.h"

#include <gtest/gtest.h>

namespace moeserve::loader {
namespace {

TEST(LoadProgress, CountsBytesAndShards) {
  LoadProgress p({{"a.safetensors", 600}, {"b.safetensors", 400}}, /*terminal=*/false);
  EXPECT_EQ(p.Line(), "loading weights:   0% (0.0 / 0.0 GiB, 0/2 shards)");
  testing::internal::CaptureStderr();
  p.Add("a.safetensors", 300);
  p.Add("a.safetensors", 300);
  p.Add("b.safetensors", 100);
  p.Add("unknown.safetensors", 100);  // not counted
  EXPECT_EQ(p.Line(), "loading weights:  70% (0.0 / 0.0 GiB, 1/2 shards)");
  p.Finish();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(p.Line(), "loading weights: 100% (0.0 / 0.0 GiB, 2/2 shards)");
  // One line per tenth reached: 30%, 60%, 70%, 100%.
  size_t lines = 0;
  for (size_t at = log.find("loading weights"); at != std::string::npos;
       at = log.find("loading weights", at + 1))
    ++lines;
  EXPECT_EQ(lines, 4u) << log;
}

TEST(LoadProgress, TerminalBarRedrawsInPlace) {
  LoadProgress p({{"a", 100}}, /*terminal=*/true);
  testing::internal::CaptureStderr();
  p.Add("a", 50);
  p.Finish();
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("\rloading weights:  50%"), std::string::npos) << out;
  EXPECT_NE(out.find("100%"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
}

}  // namespace
}  // namespace moeserve::loader
