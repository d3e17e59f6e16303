// What this machine can do, measured: the denominators of every performance figure we print.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/context.h"
#include "runtime/huge_page_arena.h"

namespace moeserve::kernels {

struct Roofline {
  double read_gbps = 0;  // streaming read bandwidth over a buffer far larger than LLC
  double bf16_fma_gflops =
      0;                      // peak of the bf16 dot-product instruction the GEMM uses, all threads
  double f32_fma_gflops = 0;  // peak f32 FMA, all threads
  // Peak of the int8 dot-product step the MXFP4 x int8 kernel uses (vpdpbusd with VNNI, else
  // vpmaddubsw + vpaddw), all threads, 2 ops per multiply-add.
  double int8_dot_gops = 0;
  // Peak of the AMX tile unit's bf16 product (TDPBF16PS), all threads; 0 where the ISA has none.
  // The bf16 and FP8 GEMMs run on it, and prefill attention (at three bf16 products per f32 one:
  // attention_amx.cc); the GEMVs on the dot instruction of bf16_fma_gflops.
  double bf16_tile_gflops = 0;
};

// The read-bandwidth probe: a 1 GiB buffer on huge pages (where THP allows, as the repacked
// weights are) read in 32 MiB passes in rotation, so a pass was last touched 1 GiB of reads ago
// and comes from DRAM; each thread sums its own contiguous part (pages first touched by the
// thread that reads them), with the ISA's streaming loop. MeasureRoofline keeps the best of 96
// passes; a benchmark can also run single passes between its own steps, to compare them with
// the bandwidth of the same moment (a shared machine's moves within seconds).
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(KernelContext& ctx);
  // One pass on every pool thread; its bandwidth in GB/s.
  double PassGbps();

 private:
  KernelContext& ctx_;
  HugePageArena arena_;
  float* buf_ = nullptr;
  size_t pass_index_ = 0;
  std::vector<double> sinks_;
};

// Takes ~1 s. Uses every thread of the context's pool and its ISA's instructions; `probe`: the
// read probe to use (null: one of its own, 1 GiB for the call).
Roofline MeasureRoofline(KernelContext& ctx, ReadBandwidthProbe* probe = nullptr);

// The compute peaks (read_gbps left 0) from one run of each chain, ~`seconds` long, on every
// thread at once: what the cores gave over those moments rather than MeasureRoofline's best
// millisecond, for a benchmark to set beside a step of similar length run next to it (on a
// shared machine the two differ by a third from minute to minute).
Roofline MeasureSustainedCompute(KernelContext& ctx, double seconds);

}  // namespace moeserve::kernels
