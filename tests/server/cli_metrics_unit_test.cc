// vLLM's periodic stats line and the request log line, from engine counter snapshots.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace moeserve::server {
namespace {

TEST(StatsLogger, QuietWhileIdleThenVllmLine) {
  StatsLogger log;
  engine::EngineStats s;
  s.kv_blocks_total = 100;
  EXPECT_FALSE(log.Tick(s, 0).has_value());   // the first call only records
  EXPECT_FALSE(log.Tick(s, 10).has_value());  // idle
  s.num_running = 2;
  s.num_waiting = 1;
  s.kv_blocks_used = 25;
  s.prompt_tokens = 300;  // computed
  s.prefix_cache_hit_tokens = 100;
  s.generation_tokens = 50;
  const auto line = log.Tick(s, 20);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "Avg prompt throughput: 30.0 tokens/s, Avg generation throughput: 5.0 tokens/s, "
            "Running: 2 reqs, Waiting: 1 reqs, KV cache usage: 25.0%, Prefix cache hit rate: "
            "25.0%");
  s.num_running = s.num_waiting = 0;
  EXPECT_FALSE(log.Tick(s, 30).has_value());
}

TEST(RequestLog, Line) {
  EXPECT_EQ(FormatFinishedRequest({7, "stop", 0.125, 1.5, 12, 30, 4}),
            "request 7 finished (stop): prompt 12 tokens (4 cached), output 30 tokens, TTFT "
            "0.125 s, e2e 1.500 s");
  EXPECT_EQ(FormatFinishedRequest({8, "abort", -1, 0.25, 5, 0, 0}),
            "request 8 finished (abort): prompt 5 tokens (0 cached), output 0 tokens, TTFT -, "
            "e2e 0.250 s");
}

}  // namespace
}  // namespace moeserve::server
