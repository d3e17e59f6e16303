// config.json's `quantization_config`, for the two formats the MiniMax-M2 family is published in:
//  - "fp8" (the official MiniMax-M2 release): F8_E4M3 weights with f32 `weight_scale_inv` per
//    128x128 block; `modules_to_not_convert` names modules left in bf16.
//  - "quark" (AMD's MXFP4 exports): U8-packed e2m1 weights with e8m0 `weight_scale` per 32
//    columns; `exclude` globs name modules left in bf16.
// Anything else is refused with a message naming the offending key.
#pragma once

#include <string>
#include <vector>

#include "loader/json_config.h"

namespace moeserve::loader {

enum class QuantMethod { kNone, kFp8Block, kMxfp4 };

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  std::vector<std::string> not_converted;  // fp8: modules_to_not_convert (dotted-suffix match)
  std::vector<std::string> exclude;        // quark: glob patterns over module names
  // quark asks for dynamic MXFP4 activations; moeserve keeps activations in bf16 (weight-only),
  // which is at least as accurate. Recorded for the log.
  bool checkpoint_quantizes_activations = false;

  // Is the linear module `module` (e.g. "model.layers.0.self_attn.q_proj") stored quantized?
  bool IsQuantized(const std::string& module) const;
  std::string Describe(bool int8_activations = false) const;
};

// Reads `quantization_config` from config.json (absent: kNone).
QuantConfig ParseQuantConfig(const JsonConfig& config);

}  // namespace moeserve::loader
