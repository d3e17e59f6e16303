// The read-bandwidth probe the kernel benchmarks print beside their figures, measured in the same
// runs (a shared machine's bandwidth moves over minutes).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "bench_timing.h"
#include "kernels/internal.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"
#include "runtime/thread_pool.h"

namespace moeserve::kernels::bench {

// Streaming read of `bytes` from a 512 MiB buffer, one contiguous share per thread, with the
// kernels' own read loop (SumBuffer, as MeasureRoofline); successive calls walk the buffer, so the
// bytes were last touched 512 MiB of reads ago and come from DRAM.
class ReadProbe {
 public:
  // On 2 MiB pages, as the engine's weights and its own probe (roofline.cc).
  explicit ReadProbe(ThreadPool& pool) : pool_(pool), sinks_(pool.num_threads()) {
    buf_ = reinterpret_cast<float*>(arena_.Allocate(kFloats * sizeof(float)));
    pool_.Run([&](size_t t, size_t nt) {
      const size_t part = kFloats / nt;
      std::fill(buf_ + t * part, buf_ + (t + 1 == nt ? kFloats : (t + 1) * part), 1.0f);
    });
  }
  // Seconds to read `bytes` (rounded to whole cache lines per thread). hot: the same bytes every
  // time (LLC-resident after the first call).
  double Seconds(size_t bytes, bool hot = false) {
    const size_t n = std::min(bytes / sizeof(float), kFloats / 2);
    if (pos_ + n > kFloats || hot) pos_ = 0;
    const double t0 = Now();
    pool_.Run([&](size_t t, size_t nt) {
      const size_t chunk = n / nt / 16 * 16;
      const float* p = buf_ + pos_ + t * chunk;
      sinks_[t] =
          BestIsa() >= Isa::kAvx512 ? avx512::SumBuffer(p, chunk) : avx2::SumBuffer(p, chunk);
    });
    const double s = Now() - t0;
    pos_ += n;
    return s;
  }

 private:
  static constexpr size_t kFloats = (size_t{512} << 20) / sizeof(float);
  ThreadPool& pool_;
  HugePageArena arena_;
  std::vector<double> sinks_;
  float* buf_ = nullptr;
  size_t pos_ = 0;
};

}  // namespace moeserve::kernels::bench
