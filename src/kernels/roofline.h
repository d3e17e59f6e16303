// What this machine can do, measured: the denominators of every performance figure we print.
#pragma once

#include "kernels/context.h"

namespace moeserve::kernels {

struct Roofline {
  double read_gbps = 0;  // streaming read bandwidth over a buffer far larger than LLC
  double bf16_fma_gflops =
      0;                      // peak of the bf16 dot-product instruction the GEMM uses, all threads
  double f32_fma_gflops = 0;  // peak f32 FMA, all threads
  // Peak of the int8 dot-product step the MXFP4 x int8 kernel uses (vpdpbusd with VNNI, else
  // vpmaddubsw + vpaddw), all threads, 2 ops per multiply-add.
  double int8_dot_gops = 0;
};

// Takes ~1 s. Uses every thread of the context's pool and its ISA's instructions.
Roofline MeasureRoofline(KernelContext& ctx);

}  // namespace moeserve::kernels
