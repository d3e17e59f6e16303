// Reads this rank's part of each parameter from the checkpoint, strictly (loader/checkpoint.h).
// Linear weights are zero-copy views into the mmap'd file: a row slice is a pointer offset, a
// column slice a row stride, so tensor parallelism costs no copies and a rank touches only the
// pages of its slices. Small fp32 parameters (norms, router, bias) are converted and owned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/weights.h"
#include "loader/checkpoint.h"
#include "loader/quant_config.h"
#include "runtime/cpu_features.h"
#include "runtime/huge_page_arena.h"

namespace moeserve::model {

// This rank's position among `size` ranks sharing one model.
struct Shard {
  int rank = 0;
  int size = 1;
};

// How the model is split over ranks: tensor parallelism for attention and (by default) for the
// experts' intermediate dim; with expert_parallel, whole experts per rank instead.
struct Parallelism {
  Shard shard;
  bool expert_parallel = false;
};

// [begin, end) of n items split as evenly as possible over shard.size parts (earlier parts get
// the remainder). Uneven splits are fine for bf16: kernels take any row count and stride.
std::pair<size_t, size_t> SplitRange(size_t n, Shard shard);
// The same in units of `align` items (the last unit may be partial): MXFP4 weights split on their
// input dim must start each rank's slice on a 32-column group. Equivalent to padding every
// rank's shard to a multiple of `align` with zeros, without storing the zeros.
std::pair<size_t, size_t> SplitRangeAligned(size_t n, Shard shard, size_t align);

// How weights are prepared at load.
struct LoadOptions {
  // MXFP4 linear weights repacked into kernels::WeightFormat::kMxfp4I8 (their activations then
  // go through int8 dot products); otherwise they are views into the checkpoint.
  bool int8_activations = false;
  // bf16 linear weights repacked into 16-row panels (kernels::WeightFormat::kBf16Panel: the AVX2
  // and AVX-512 BF16 panel kernels' layout). Off: they are views into the checkpoint.
  bool bf16_panels = false;
  // FP8-block linear weights repacked into 16-row panels (kFp8Panel, the AVX2 kernels' layout).
  bool fp8_panels = false;
  // FP8-block linear weights (those not in panels) copied row by row into the repacked weights'
  // memory, 2 MiB pages where THP allows: the same bytes and format. The checkpoint's mapping has
  // 4 KiB pages, and the AVX-512 BF16 GEMV streamed them slower: decode on the FP8 bench
  // checkpoint, 4 alternating rounds, experts 28.3 / 33.2 / 29.9 / 30.0 -> 30.2 / 37.4 / 35.0 /
  // 37.5 GB/s, qkv 27.0 / 32.3 / 33.1 / 32.2 -> 31.2 / 37.0 / 34.9 / 36.3 GB/s (Zen 5).
  bool fp8_huge_pages = false;
};

// The layouts the kernels of `isa` stream best, for `--weight-layout auto` (`repack` false:
// every bf16 / FP8 weight a view into the checkpoint): bf16 panels wherever a SIMD panel kernel
// exists; FP8 panels below AVX-512 BF16, whose vdpbf16ps kernels decode FP8 rows in registers
// (there the rows are copied onto huge pages as they are).
LoadOptions WeightLayoutFor(Isa isa, bool repack);

// Owns weights repacked at load (on huge pages where THP allows); views point into it, so it must
// outlive the model.
using RepackedStore = HugePageArena;

// Bytes a kernel reads to apply `w` once (codes plus scales).
size_t BytesOf(const kernels::WeightMatrix& w);

// Operations (2 per multiply-add) of applying `w` to `rows` rows.
inline double MatMulFlops(size_t rows, const kernels::WeightMatrix& w) {
  return 2.0 * static_cast<double>(rows) * static_cast<double>(w.rows) *
         static_cast<double>(w.cols);
}

// Rows [row_begin, row_end) x cols [col_begin, col_end) of a 2-D parameter.
struct Slice2D {
  size_t row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
};

class WeightReader {
 public:
  WeightReader(loader::StrictLoader& loader, loader::QuantConfig quant = {},
               LoadOptions options = {})
      : loader_(loader), quant_(std::move(quant)), options_(options) {}

  // A [out, in] linear weight, whole or sliced: bf16, or FP8-block / MXFP4 with its scales when
  // the checkpoint's quantization_config says this module is quantized. Names the tensor and
  // what was expected on any mismatch.
  kernels::WeightMatrix Linear(const std::string& name, size_t out, size_t in);
  kernels::WeightMatrix Linear(const std::string& name, size_t out, size_t in, Slice2D slice);

  // A [rows, cols] bf16 table read as is, whatever the quantization config says (the token
  // embedding: published FP8 and MXFP4 checkpoints quantize linear layers only).
  kernels::WeightMatrix DenseTable(const std::string& name, size_t rows, size_t cols);

  // Column alignment a slice of this linear's input dim needs (32 for MXFP4, else 1).
  size_t ColumnAlignment(const std::string& name) const;

  // Validates a [out, in] linear weight and marks it used without mapping it (another
  // rank's expert under expert parallelism).
  void CheckLinear(const std::string& name, size_t out, size_t in);

  // A 1-D parameter (bf16 or f32 in the checkpoint) as f32, optionally a [begin, end) slice.
  std::vector<float> Vector(const std::string& name, size_t n);
  std::vector<float> Vector(const std::string& name, size_t n, size_t begin, size_t end);
  // A 2-D bf16/f32 parameter converted to an owned f32 [rows, cols] (router gates).
  std::vector<float> MatrixF32(const std::string& name, size_t rows, size_t cols);

  size_t bytes_mapped() const { return bytes_mapped_; }
  // Bytes written by repacking, and the checkpoint bytes they replace.
  size_t repacked_bytes() const { return repacked_bytes_; }
  size_t repacked_source_bytes() const { return repacked_source_bytes_; }
  // What was repacked, e.g. "MXFP4 for int8 activations 3672 MiB, bf16 panels 216 MiB".
  std::string RepackedSummary() const;
  // The repacked weights, for the model's owner to keep.
  RepackedStore TakeRepacked() { return std::move(repacked_); }

 private:
  struct LinearTensors {
    const loader::TensorInfo* weight;
    const loader::TensorInfo* scales;  // null for bf16
    kernels::WeightFormat format;
  };
  LinearTensors TakeLinear(const std::string& name, size_t out, size_t in);
  kernels::WeightMatrix RepackForInt8(const kernels::WeightMatrix& mxfp4);
  kernels::WeightMatrix RepackBf16Panels(const kernels::WeightMatrix& dense_bf16);
  kernels::WeightMatrix RepackFp8Panels(const kernels::WeightMatrix& fp8_block);
  kernels::WeightMatrix CopyToHugePages(const kernels::WeightMatrix& fp8_block);
  // Memory for a repacked copy of `source`, kept in repacked_ and counted.
  uint8_t* AllocateRepacked(size_t bytes, const kernels::WeightMatrix& source,
                            kernels::WeightFormat into);

  loader::StrictLoader& loader_;
  loader::QuantConfig quant_;
  LoadOptions options_;
  size_t bytes_mapped_ = 0;  // bytes of the slices this rank uses
  size_t repacked_bytes_ = 0, repacked_source_bytes_ = 0;
  size_t repacked_mxfp4_i8_ = 0, repacked_bf16_panels_ = 0, repacked_fp8_panels_ = 0,
         repacked_fp8_copied_ = 0;
  RepackedStore repacked_;
};

}  // namespace moeserve::model
