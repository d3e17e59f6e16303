#include "kernels/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/internal.h"
#include "kernels/isa_kernels.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"

namespace moeserve::kernels {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The compute peaks of the table's probes (read_gbps left 0), all threads at once.
// measure(run) decides the timing: run(iters) runs iters steps of a probe's chains on every
// thread at once and returns its seconds (the slowest thread counts); measure returns the
// iterations and seconds to count.
template <typename Measure>
Roofline ComputePeaks(KernelContext& ctx, const Measure& measure) {
  const IsaKernels& kern = ctx.kernels();
  ThreadPool& pool = ctx.pool();
  const size_t threads = pool.num_threads();
  std::vector<float> fsinks(threads);
  std::vector<int32_t> isinks(threads);
  auto peak = [&](const IsaKernels::Probe& probe, void* sink0, size_t sink_bytes) {
    if (!probe.run) return 0.0;
    char* sinks0 = static_cast<char*>(sink0);
    auto run = [&](size_t iters) {
      const auto t0 = std::chrono::steady_clock::now();
      pool.Run([&](size_t t, size_t) { probe.run(iters, sinks0 + t * sink_bytes); });
      return Seconds(t0, std::chrono::steady_clock::now());
    };
    const auto [iters, s] = measure(run);
    return threads * iters * 12.0 * probe.ops / s / 1e9;
  };
  Roofline roof;
  roof.f32_fma_gflops = peak(kern.f32_fma, fsinks.data(), sizeof(float));
  // Without a bf16 dot instruction the bf16 GEMMs run on f32 FMAs: the same peak.
  roof.bf16_fma_gflops =
      kern.bf16_dot.run ? peak(kern.bf16_dot, fsinks.data(), sizeof(float)) : roof.f32_fma_gflops;
  roof.int8_dot_gops = peak(kern.int8_dot, isinks.data(), sizeof(int32_t));
  roof.bf16_tile_gflops = peak(kern.bf16_tile, fsinks.data(), sizeof(float));
  return roof;
}

constexpr size_t kProbeFloats = (size_t{1} << 30) / sizeof(float), kPassFloats = kProbeFloats / 32;

// Thread t's part [begin, end) of the `len` floats from `begin`, in whole cache lines.
std::pair<size_t, size_t> Part(size_t begin, size_t len, size_t t, size_t nt) {
  const size_t chunk = len / nt / 64 * 64;
  const size_t b = begin + chunk * t, e = t + 1 == nt ? begin + len : b + chunk;
  return {b, e};
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(KernelContext& ctx)
    : ctx_(ctx), sinks_(ctx.pool().num_threads()) {
  buf_ = reinterpret_cast<float*>(arena_.Allocate(kProbeFloats * sizeof(float)));
  ctx.pool().Run([&](size_t t, size_t nt) {
    for (size_t p = 0; p < kProbeFloats; p += kPassFloats) {
      auto [b, e] = Part(p, kPassFloats, t, nt);
      std::fill(buf_ + b, buf_ + e, 1.0f);
    }
  });
}

double ReadBandwidthProbe::PassGbps() {
  const size_t begin = (pass_index_++ % 32) * kPassFloats;
  const IsaKernels& kern = ctx_.kernels();
  const auto t0 = std::chrono::steady_clock::now();
  ctx_.pool().Run([&](size_t t, size_t nt) {
    auto [b, e] = Part(begin, kPassFloats, t, nt);
    sinks_[t] = kern.sum_buffer(buf_ + b, e - b);
  });
  return kPassFloats * sizeof(float) / Seconds(t0, std::chrono::steady_clock::now()) / 1e9;
}

Roofline MeasureRoofline(KernelContext& ctx, ReadBandwidthProbe* probe) {
  // Read bandwidth: many short passes, the best one kept: on a shared machine a long pass is
  // rarely run with every thread on a core. On huge pages: the machine's best.
  double read_gbps = 0;
  {
    std::optional<ReadBandwidthProbe> own;
    if (!probe) probe = &own.emplace(ctx);
    for (int r = 0; r < 96; ++r) read_gbps = std::max(read_gbps, probe->PassGbps());
  }
  // Compute peaks: ~1 ms per run (short, for the same reason), independent chains in registers,
  // all threads, best of 30: with only a few runs, one preempted thread on a shared machine
  // halved the 2-thread figure.
  Roofline roof = ComputePeaks(ctx, [](const auto& run) {
    const size_t iters = 200'000;
    double best = 1e30;
    for (int r = 0; r < 30; ++r) best = std::min(best, run(iters));
    return std::pair{iters, best};
  });
  roof.read_gbps = read_gbps;
  return roof;
}

Roofline MeasureSustainedCompute(KernelContext& ctx, double seconds) {
  // A short run sizes the long one; the long one's rate is the figure.
  return ComputePeaks(ctx, [seconds](const auto& run) {
    const size_t calib = 50'000;
    const double rate = calib / std::max(run(calib), 1e-6);
    const size_t iters = std::max<size_t>(calib, static_cast<size_t>(rate * seconds));
    return std::pair{iters, run(iters)};
  });
}

}  // namespace moeserve::kernels
