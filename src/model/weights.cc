#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "kernels/bf16_panels.h"
#include "kernels/fp8_panels.h"
#include "kernels/mxfp4_i8.h"

namespace moeserve::model {

std::pair<size_t, size_t> SplitRange(size_t n, Shard shard) {
  const size_t parts = static_cast<size_t>(shard.size), r = static_cast<size_t>(shard.rank);
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

kernels::WeightMatrix WeightReader::Linear(const std::string& name, size_t out, size_t in) {
  return Linear(name, out, in, Slice2D{0, out, 0, in});
}

std::pair<size_t, size_t> SplitRangeAligned(size_t n, Shard shard, size_t align) {
  const auto [u0, u1] = SplitRange((n + align - 1) / align, shard);
  return {std::min(n, u0 * align), std::min(n, u1 * align)};
}

size_t BytesOf(const kernels::WeightMatrix& w) {
  const size_t elems = w.rows * w.cols;
  switch (w.format) {
    case kernels::WeightFormat::kDense:
      return elems * DTypeSize(w.dtype);
    case kernels::WeightFormat::kFp8Block:
      return elems + ((w.row0 + w.rows + 127) / 128 - w.row0 / 128) *
                         ((w.col0 + w.cols + 127) / 128 - w.col0 / 128) * sizeof(float);
    case kernels::WeightFormat::kMxfp4:
      return elems / 2 + w.rows * ((w.cols + 31) / 32);
    case kernels::WeightFormat::kMxfp4I8:
      return kernels::Mxfp4I8CodeBytes(w.rows, w.cols) + kernels::Mxfp4I8ScaleBytes(w.rows, w.cols);
    case kernels::WeightFormat::kBf16Panel:
      return kernels::Bf16PanelElems(w.rows, w.cols) * sizeof(bf16);
    case kernels::WeightFormat::kFp8Panel:
      return kernels::Fp8PanelCodeBytes(w.rows, w.cols) +
             kernels::Fp8PanelScaleFloats(w.rows, w.cols, w.col0) * sizeof(float);
  }
  return 0;
}

LoadOptions WeightLayoutFor(Isa isa, bool repack) {
  LoadOptions o;
  o.bf16_panels = repack && isa >= Isa::kAvx2;
  // FP8 panels where the FP8 GEMV runs on f32 FMAs: AVX2, AVX-512 without BF16, and AMX cores,
  // whose vdpbf16ps runs at half their f32 FMA rate (Emerald Rapids: FP8 decode 41-44% -> 62-67%
  // of the read bandwidth on the panels); the AVX-512 BF16 kernels (Zen 4 / 5) decode the
  // checkpoint's rows in registers.
  o.fp8_panels = repack && isa >= Isa::kAvx2 && (isa < Isa::kAvx512Bf16 || isa == Isa::kAmx);
  o.fp8_huge_pages = repack && isa >= Isa::kAvx512Bf16 && !o.fp8_panels;
  return o;
}

namespace {
std::string ModuleOf(const std::string& weight_name) {
  const std::string suffix = ".weight";
  MOESERVE_CHECK(
      weight_name.size() > suffix.size() &&
          weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0,
      weight_name);
  return weight_name.substr(0, weight_name.size() - suffix.size());
}
int64_t I(size_t v) {
  return static_cast<int64_t>(v);
}
}  // namespace

WeightReader::LinearTensors WeightReader::TakeLinear(const std::string& name, size_t out,
                                                     size_t in) {
  const std::string module = ModuleOf(name);
  if (!quant_.IsQuantized(module))
    return {&loader_.Take(name, {I(out), I(in)}, {DType::kBF16}), nullptr,
            kernels::WeightFormat::kDense};
  if (quant_.method == loader::QuantMethod::kFp8Block) {
    const auto& w = loader_.Take(name, {I(out), I(in)}, {DType::kF8E4M3});
    const auto& s = loader_.Take(module + ".weight_scale_inv",
                                 {I((out + 127) / 128), I((in + 127) / 128)}, {DType::kF32});
    return {&w, &s, kernels::WeightFormat::kFp8Block};
  }
  if (in % 32 != 0)
    Fail("tensor ", name, ": MXFP4 needs the input dim to be a multiple of the group size 32, got ",
         in);
  const auto& w = loader_.Take(name, {I(out), I(in / 2)}, {DType::kU8});
  const auto& s = loader_.Take(module + ".weight_scale", {I(out), I(in / 32)}, {DType::kU8});
  return {&w, &s, kernels::WeightFormat::kMxfp4};
}

size_t WeightReader::ColumnAlignment(const std::string& name) const {
  return quant_.method == loader::QuantMethod::kMxfp4 && quant_.IsQuantized(ModuleOf(name)) ? 32
                                                                                            : 1;
}

kernels::WeightMatrix WeightReader::Linear(const std::string& name, size_t out, size_t in,
                                           Slice2D s) {
  const LinearTensors t = TakeLinear(name, out, in);
  MOESERVE_CHECK(
      s.row_end <= out && s.col_end <= in && s.row_begin <= s.row_end && s.col_begin <= s.col_end,
      name);
  kernels::WeightMatrix w;
  w.format = t.format;
  w.rows = s.row_end - s.row_begin;
  w.cols = s.col_end - s.col_begin;
  w.row0 = s.row_begin;
  w.col0 = s.col_begin;
  switch (t.format) {
    case kernels::WeightFormat::kDense:
      w.dtype = DType::kBF16;
      w.data = reinterpret_cast<const bf16*>(t.weight->data) + s.row_begin * in + s.col_begin;
      w.row_stride = in;
      break;
    case kernels::WeightFormat::kFp8Block:
      w.dtype = DType::kF8E4M3;
      w.data = t.weight->data + s.row_begin * in + s.col_begin;
      w.row_stride = in;
      w.scales = t.scales->data;  // the full grid; (row0, col0) locate the view in it
      w.scale_stride = (in + 127) / 128;
      break;
    case kernels::WeightFormat::kMxfp4:
      MOESERVE_CHECK(s.col_begin % 32 == 0, name, " sliced at column ", s.col_begin);
      w.dtype = DType::kU8;
      w.data = t.weight->data + s.row_begin * (in / 2) + s.col_begin / 2;
      w.row_stride = in / 2;
      w.scales = t.scales->data + s.row_begin * (in / 32) + s.col_begin / 32;
      w.scale_stride = in / 32;
      break;
    case kernels::WeightFormat::kMxfp4I8:  // made only by repacking, never read from a file
    case kernels::WeightFormat::kBf16Panel:
    case kernels::WeightFormat::kFp8Panel:
      Fail("tensor ", name, ": unexpected format");
  }
  bytes_mapped_ += BytesOf(w);
  if (options_.int8_activations && w.format == kernels::WeightFormat::kMxfp4)
    return RepackForInt8(w);
  if (options_.bf16_panels && w.format == kernels::WeightFormat::kDense) return RepackBf16Panels(w);
  if (options_.fp8_panels && w.format == kernels::WeightFormat::kFp8Block &&
      kernels::Fp8PanelRepackable(w))
    return RepackFp8Panels(w);
  if (options_.fp8_huge_pages && w.format == kernels::WeightFormat::kFp8Block)
    return CopyToHugePages(w);
  return w;
}

namespace {

// The checkpoint pages wholly inside [begin, end), dropped from this process's resident set once
// their weights live repacked: the mapping is read-only and file-backed, so a later read (another
// view of the same tensor) faults them back in from the file unchanged.
void ReleaseSourcePages(const void* begin, const void* end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(end) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

}  // namespace

uint8_t* WeightReader::AllocateRepacked(size_t bytes, const kernels::WeightMatrix& source,
                                        kernels::WeightFormat into) {
  uint8_t* mem = repacked_.Allocate(bytes);
  repacked_bytes_ += bytes;
  repacked_source_bytes_ += BytesOf(source);
  (into == kernels::WeightFormat::kMxfp4I8     ? repacked_mxfp4_i8_
   : into == kernels::WeightFormat::kBf16Panel ? repacked_bf16_panels_
   : into == kernels::WeightFormat::kFp8Panel  ? repacked_fp8_panels_
                                               : repacked_fp8_copied_) += bytes;
  return mem;
}

kernels::WeightMatrix WeightReader::RepackBf16Panels(const kernels::WeightMatrix& w) {
  auto* mem = AllocateRepacked(kernels::Bf16PanelElems(w.rows, w.cols) * sizeof(bf16), w,
                               kernels::WeightFormat::kBf16Panel);
  const kernels::WeightMatrix out = kernels::RepackBf16Panels(w, reinterpret_cast<bf16*>(mem));
  if (w.rows > 0) {
    const auto* src = static_cast<const bf16*>(w.data);
    ReleaseSourcePages(src, src + (w.rows - 1) * w.row_stride + w.cols);
  }
  return out;
}

kernels::WeightMatrix WeightReader::RepackForInt8(const kernels::WeightMatrix& w) {
  // Codes, then scales from the next 64-byte boundary, in one allocation.
  const size_t scales_at = (kernels::Mxfp4I8CodeBytes(w.rows, w.cols) + 63) / 64 * 64;
  const size_t total = scales_at + kernels::Mxfp4I8ScaleBytes(w.rows, w.cols);
  auto* mem = AllocateRepacked(total, w, kernels::WeightFormat::kMxfp4I8);
  const kernels::WeightMatrix out = kernels::RepackMxfp4I8(w, mem, mem + scales_at);
  if (w.rows > 0) {
    const auto* codes = static_cast<const uint8_t*>(w.data);
    const auto* scales = static_cast<const uint8_t*>(w.scales);
    ReleaseSourcePages(codes, codes + (w.rows - 1) * w.row_stride + w.cols / 2);
    ReleaseSourcePages(scales, scales + (w.rows - 1) * w.scale_stride + w.cols / 32);
  }
  return out;
}

kernels::WeightMatrix WeightReader::RepackFp8Panels(const kernels::WeightMatrix& w) {
  // Codes, then the scale table from the next 64-byte boundary, in one allocation.
  const size_t scales_at = (kernels::Fp8PanelCodeBytes(w.rows, w.cols) + 63) / 64 * 64;
  const size_t total =
      scales_at + kernels::Fp8PanelScaleFloats(w.rows, w.cols, w.col0) * sizeof(float);
  auto* mem = AllocateRepacked(total, w, kernels::WeightFormat::kFp8Panel);
  const kernels::WeightMatrix out =
      kernels::RepackFp8Panels(w, mem, reinterpret_cast<float*>(mem + scales_at));
  if (w.rows > 0) {
    const auto* codes = static_cast<const uint8_t*>(w.data);
    ReleaseSourcePages(codes, codes + (w.rows - 1) * w.row_stride + w.cols);
  }
  return out;
}

kernels::WeightMatrix WeightReader::CopyToHugePages(const kernels::WeightMatrix& w) {
  // Rows of w.cols codes, back to back; the scales stay the checkpoint's grid, which (row0, col0)
  // still locate.
  auto* mem = AllocateRepacked(w.rows * w.cols, w, kernels::WeightFormat::kFp8Block);
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (size_t r = 0; r < w.rows; ++r) std::memcpy(mem + r * w.cols, src + r * w.row_stride, w.cols);
  kernels::WeightMatrix out = w;
  out.data = mem;
  out.row_stride = w.cols;
  if (w.rows > 0) ReleaseSourcePages(src, src + (w.rows - 1) * w.row_stride + w.cols);
  return out;
}

std::string WeightReader::RepackedSummary() const {
  std::string out;
  auto add = [&](const char* what, size_t bytes) {
    if (bytes == 0) return;
    if (!out.empty()) out += ", ";
    out += std::string(what) + " " + std::to_string(bytes >> 20) + " MiB";
  };
  add("MXFP4 for int8 activations", repacked_mxfp4_i8_);
  add("bf16 in 16-row panels", repacked_bf16_panels_);
  add("FP8 in 16-row panels", repacked_fp8_panels_);
  add("FP8-block rows on huge pages", repacked_fp8_copied_);
  return out;
}

kernels::WeightMatrix WeightReader::DenseTable(const std::string& name, size_t rows, size_t cols) {
  const auto& t = loader_.Take(name, {I(rows), I(cols)}, {DType::kBF16});
  const kernels::WeightMatrix w =
      kernels::Bf16Matrix(reinterpret_cast<const bf16*>(t.data), rows, cols);
  bytes_mapped_ += BytesOf(w);
  return w;
}

void WeightReader::CheckLinear(const std::string& name, size_t out, size_t in) {
  TakeLinear(name, out, in);
}

namespace {
float ElementAsF32(const loader::TensorInfo& t, size_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case DType::kBF16: {
      bf16 v;
      std::memcpy(&v, t.data + i * 2, 2);
      return Bf16ToF32(v);
    }
    default:
      MOESERVE_CHECK(false, "unexpected dtype for ", t.name);
  }
  return 0;
}
}  // namespace

std::vector<float> WeightReader::Vector(const std::string& name, size_t n) {
  return Vector(name, n, 0, n);
}

std::vector<float> WeightReader::Vector(const std::string& name, size_t n, size_t begin,
                                        size_t end) {
  const auto& t = loader_.Take(name, {static_cast<int64_t>(n)}, {DType::kBF16, DType::kF32});
  MOESERVE_CHECK(begin <= end && end <= n, name);
  std::vector<float> v(end - begin);
  for (size_t i = begin; i < end; ++i) v[i - begin] = ElementAsF32(t, i);
  bytes_mapped_ += (end - begin) * DTypeSize(t.dtype);
  return v;
}

std::vector<float> WeightReader::MatrixF32(const std::string& name, size_t rows, size_t cols) {
  const auto& t = loader_.Take(name, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)},
                               {DType::kBF16, DType::kF32});
  std::vector<float> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsF32(t, i);
  bytes_mapped_ += t.num_bytes;
  return v;
}

}  // namespace moeserve::model
