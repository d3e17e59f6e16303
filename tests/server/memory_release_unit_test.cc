#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "server/memory_release.h"

namespace moeserve::server {
namespace {

// Resident pages among [begin, end) (mincore).
size_t ResidentPages(uintptr_t begin, uintptr_t end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  begin = begin / page * page;
  std::vector<unsigned char> v((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, v.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

// Touches ~256 KB of stack below the caller and returns the lowest address it wrote.
__attribute__((noinline)) uintptr_t TouchDeepStack() {
  volatile char buf[256 << 10];
  for (size_t i = 0; i < sizeof buf; i += 1024) buf[i] = static_cast<char>(i);
  return reinterpret_cast<uintptr_t>(&buf[0]);
}

TEST(MemoryRelease, ReleaseUnusedStackHandsBackPagesBelowTheFrame) {
  size_t before = 0, after = 0;
  std::thread t([&] {
    const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    const uintptr_t low = TouchDeepStack();
    // The deep region, well below the frame and the kept zone.
    const uintptr_t end = frame - kStackKeepBytes - (64u << 10);
    before = ResidentPages(low + 4096, end);
    ReleaseUnusedStack();
    after = ResidentPages(low + 4096, end);
  });
  t.join();
  EXPECT_GT(before, 20u);  // TouchDeepStack wrote one byte per KiB
  EXPECT_EQ(after, 0u);
}

TEST(MemoryRelease, StackStillUsableAfterRelease) {
  std::thread t([] {
    TouchDeepStack();
    ReleaseUnusedStack();
    const uintptr_t low = TouchDeepStack();  // fresh zero pages fault in again
    EXPECT_NE(low, 0u);
  });
  t.join();
}

TEST(MemoryRelease, IdleTrimIsRateLimited) {
  IdleTrim hourly(std::chrono::hours(1));
  EXPECT_TRUE(hourly.Due());  // the first idle moment always trims
  EXPECT_FALSE(hourly.Due());
  EXPECT_FALSE(hourly.Due());
  IdleTrim always(std::chrono::milliseconds(0));
  EXPECT_TRUE(always.Due());
  EXPECT_TRUE(always.Due());
  always.Trim();
  EXPECT_EQ(always.trims(), 1u);
}

}  // namespace
}  // namespace moeserve::server
