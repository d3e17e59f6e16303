// Options shared by the commands that load a model (generate, bench, serve).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/dtype.h"

namespace moeserve::apps {

struct ModelOptions {
  std::string model_dir;
  size_t threads = 0;  // 0 = all cores
  // --activation-dtype: "int8" (MXFP4 weights repacked at load and multiplied with int8
  // activation blocks; other weights unchanged), "bf16" (every linear input rounded to bf16,
  // MXFP4 decoded from the mmap'd checkpoint), or "auto" = int8 on every ISA: within GSM8K's
  // standard error of the bf16 reference, and faster on MXFP4 (AVX2: 2.3-3.7x; AVX-512 VNNI,
  // one Zen 4 core, weights in cache: 300 GOP/s against vdpbf16ps's 142 at 16 tokens, 210 at
  // 512; bench_mxfp4_i8 --hot).
  std::string activation_dtype = "auto";
  // --weight-layout: "auto" repacks bf16 linear weights at load into 16-row panels where the
  // kernels in use are AVX2 ones (no per-call packing; same bytes, same numerics); "checkpoint"
  // keeps every bf16 weight a view into the mmap'd checkpoint.
  std::string weight_layout = "auto";
};

// The bundled model (models/minimax-m2-tiny in the source tree): the default of serve and generate.
std::string BundledModelDir();

// Adds --model, --threads and --activation-dtype. `default_model` is used when --model is omitted
// ("" = required).
void AddModelOptions(CLI::App& app, ModelOptions& opts, const std::string& default_model = "");

// --kv-cache-dtype (any flag may also be spelled with underscores, main.cc): auto | bf16 | fp8 |
// fp8_e4m3 (vLLM's spellings).
void AddKvCacheDtypeOption(CLI::App& app, std::string& value);
// The KV element type for an option value; throws moeserve::Error on an unknown one.
DType ParseKvCacheDtype(const std::string& value);

// Parses "1,2,3" into ids; throws moeserve::Error naming the bad item.
std::vector<int32_t> ParseIdList(const std::string& s);

}  // namespace moeserve::apps
