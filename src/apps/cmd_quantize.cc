// moeserve quantize: a bf16 checkpoint -> the layout a published quantized release uses.
//   fp8-block: MiniMax-M2's official FP8 release. q/k/v/o projections and every expert's
//              w1/w2/w3 become F8_E4M3 codes plus an F32 `weight_scale_inv` per 128x128 block.
//   mxfp4:     AMD Quark's MXFP4 export. Only the experts' w1/w2/w3 become packed e2m1 codes
//              (U8 [out, in/2]) plus an e8m0 `weight_scale` (U8 [out, in/32]).
// Everything else (embeddings, norms, router gate, routing bias, lm_head, MTP layers) is copied
// unchanged. The numerics are kernels/quant.h's quantizers, whose rounding rules are written down
// there; tools/quantize.py reimplements them independently and tests/quant checks both agree
// byte for byte.
//
// Output files mirror the input's sharding (same shard names, same tensor-to-shard assignment),
// and tensors are quantized one at a time, so memory stays at one f32 copy of the largest linear.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/command_registry.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "kernels/quant.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_writer.h"
#include "model/registry.h"
#include "runtime/thread_pool.h"

namespace moeserve::apps {
namespace {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

enum class Format { kFp8Block, kMxfp4 };

struct QuantizeOptions {
  std::string model_dir, out_dir, format;
  size_t threads = 0;
};

// A linear weight that gets quantized: its checkpoint name and [out, in] shape.
struct Target {
  size_t out = 0, in = 0;
};

using ArchNames = model::QuantizableLinears;

ArchNames NamesFor(const std::string& architecture) {
  const ArchNames& names = model::FindArchitecture(architecture).quantizable;
  if (names.experts.empty())
    Fail("moeserve quantize does not know the linear layers of ", architecture);
  return names;
}

// Every linear the format quantizes, from the model config (not from whatever the files hold):
// a checkpoint that lacks one is refused rather than half-quantized.
std::map<std::string, Target> PlanTargets(const model::ModelConfig& c, const ArchNames& names,
                                          Format format) {
  std::map<std::string, Target> t;
  const size_t h = c.hidden_size, inter = c.expert_intermediate_size;
  for (size_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    if (format == Format::kFp8Block) {
      t[p + "self_attn.q_proj.weight"] = {c.q_width(), h};
      t[p + "self_attn.k_proj.weight"] = {c.kv_width(), h};
      t[p + "self_attn.v_proj.weight"] = {c.kv_width(), h};
      t[p + "self_attn.o_proj.weight"] = {h, c.q_width()};
    }
    for (size_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = p + names.experts + std::to_string(e) + ".";
      for (const auto& n : names.up) t[ep + n + ".weight"] = {inter, h};
      for (const auto& n : names.down) t[ep + n + ".weight"] = {h, inter};
    }
  }
  return t;
}

ordered_json QuantizationConfig(Format format, const ArchNames& names) {
  if (format == Format::kFp8Block)
    return {{"quant_method", "fp8"},
            {"fmt", "float8_e4m3fn"},
            {"activation_scheme", "dynamic"},
            {"weight_block_size", {128, 128}},
            {"modules_to_not_convert", {"gate", "e_score_correction_bias", "lm_head"}}};
  auto spec = [](bool dynamic) {
    return ordered_json{{"dtype", "fp4"},
                        {"qscheme", "per_group"},
                        {"group_size", 32},
                        {"ch_axis", -1},
                        {"scale_format", "e8m0"},
                        {"scale_type", "float"},
                        {"round_method", "half_even"},
                        {"is_dynamic", dynamic}};
  };
  return {{"quant_method", "quark"},
          {"global_quant_config",
           {{"weight", spec(false)},
            {"input_tensors", spec(true)},
            {"output_tensors", nullptr},
            {"bias", nullptr}}},
          {"exclude", names.mxfp4_exclude},
          {"export", {{"weight_format", "real_quantized"}, {"pack_method", "reorder"}}},
          {"layer_quant_config", ordered_json::object()},
          {"layer_type_quant_config", ordered_json::object()},
          {"kv_cache_quant_config", ordered_json::object()}};
}

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}
std::string ScaleName(const std::string& weight_name, Format format) {
  return ModuleOf(weight_name) +
         (format == Format::kFp8Block ? ".weight_scale_inv" : ".weight_scale");
}
int64_t I(size_t v) {
  return static_cast<int64_t>(v);
}

// Refuses a target the format cannot represent, or that the checkpoint holds in another form.
void CheckTarget(const loader::Checkpoint& ckpt, const std::string& name, const Target& t,
                 Format format) {
  const loader::TensorInfo* info = ckpt.Find(name);
  if (!info)
    Fail(ckpt.dir(), ": missing tensor ", name, " (expected BF16 [", t.out, ", ", t.in, "])");
  if (info->dtype != DType::kBF16)
    Fail(info->file, ": tensor ", name, ": expected dtype BF16, found ", DTypeName(info->dtype));
  if (info->shape != std::vector<int64_t>{I(t.out), I(t.in)})
    Fail(info->file, ": tensor ", name, ": expected shape [", t.out, ", ", t.in, "], found ",
         loader::ShapeString(info->shape));
  if (format == Format::kMxfp4 && t.in % 32 != 0)
    Fail("tensor ", name, ": MXFP4 needs the input dim to be a multiple of the group size 32, got ",
         t.in, " (use --format fp8-block for this model)");
  if (ckpt.Find(ScaleName(name, format)))
    Fail(info->file, ": tensor ", ScaleName(name, format),
         " already exists (is the input quantized?)");
}

// Quantizes one [out, in] bf16 weight and writes its codes and scales. Rows are split over the
// pool in whole 128-row bands (FP8) or single rows (MXFP4), so the result does not depend on the
// thread count.
void QuantizeOne(const loader::TensorInfo& info, const Target& t, Format format, ThreadPool& pool,
                 loader::SafetensorsWriter& writer) {
  const size_t out = t.out, in = t.in;
  std::vector<float> w(out * in);
  std::vector<uint8_t> codes(format == Format::kFp8Block ? out * in : out * in / 2);
  const size_t cb = (in + 127) / 128;
  std::vector<float> scale_inv(format == Format::kFp8Block ? (out + 127) / 128 * cb : 0);
  std::vector<uint8_t> scale_e8m0(format == Format::kMxfp4 ? out * in / 32 : 0);
  std::atomic<size_t> bad_index{SIZE_MAX};
  const size_t band = format == Format::kFp8Block ? 128 : 1;
  pool.ParallelFor((out + band - 1) / band, 1, [&](size_t b0, size_t b1) {
    const size_t r0 = b0 * band, r1 = std::min(out, b1 * band);
    for (size_t i = r0 * in; i < r1 * in; ++i) {
      bf16 v;
      std::memcpy(&v, info.data + i * 2, 2);  // the mmap'd data need not be 2-aligned
      w[i] = Bf16ToF32(v);
      if (!std::isfinite(w[i])) {  // report the first one, whatever the thread timing
        size_t seen = bad_index;
        while (i < seen && !bad_index.compare_exchange_weak(seen, i)) {
        }
        break;
      }
    }
    if (bad_index != SIZE_MAX) return;
    for (size_t r = r0; r < r1; r += band) {
      const size_t rows = std::min(band, r1 - r);
      if (format == Format::kFp8Block)
        kernels::QuantizeFp8Block(&w[r * in], rows, in, &codes[r * in], &scale_inv[r / 128 * cb]);
      else
        kernels::QuantizeMxfp4(&w[r * in], rows, in, &codes[r * in / 2], &scale_e8m0[r * in / 32]);
    }
  });
  if (bad_index != SIZE_MAX)
    Fail(info.file, ": tensor ", info.name, " has a non-finite value at [", bad_index / in, ", ",
         bad_index % in, "]; refusing to quantize it");
  writer.Write(info.name, codes.data(), codes.size());
  if (format == Format::kFp8Block)
    writer.Write(ScaleName(info.name, format), scale_inv.data(), scale_inv.size() * sizeof(float));
  else
    writer.Write(ScaleName(info.name, format), scale_e8m0.data(), scale_e8m0.size());
}

std::vector<loader::TensorSpec> OutputSpecs(const std::vector<const loader::TensorInfo*>& inputs,
                                            const std::map<std::string, Target>& targets,
                                            Format format) {
  std::vector<loader::TensorSpec> specs;
  for (const loader::TensorInfo* t : inputs) {
    auto it = targets.find(t->name);
    if (it == targets.end()) {
      specs.push_back({t->name, t->dtype, t->shape});
      continue;
    }
    const size_t out = it->second.out, in = it->second.in;
    if (format == Format::kFp8Block) {
      specs.push_back({t->name, DType::kF8E4M3, {I(out), I(in)}});
      specs.push_back(
          {ScaleName(t->name, format), DType::kF32, {I((out + 127) / 128), I((in + 127) / 128)}});
    } else {
      specs.push_back({t->name, DType::kU8, {I(out), I(in / 2)}});
      specs.push_back({ScaleName(t->name, format), DType::kU8, {I(out), I(in / 32)}});
    }
  }
  return specs;
}

ordered_json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  if (!f) Fail(p.string(), ": cannot read");
  try {
    return ordered_json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    Fail(p.string(), ": invalid JSON: ", e.what());
  }
}

void WriteJson(const fs::path& p, const ordered_json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
  if (!f) Fail(p.string(), ": write failed");
}

int RunQuantize(const QuantizeOptions& o) {
  const Format format = o.format == "fp8-block" ? Format::kFp8Block : Format::kMxfp4;
  const fs::path in_dir(o.model_dir), out_dir(o.out_dir);
  ordered_json config = ReadJson(in_dir / "config.json");
  if (config.contains("quantization_config"))
    Fail((in_dir / "config.json").string(),
         ": the input already has a quantization_config; quantize needs a bf16 checkpoint");
  const model::ModelConfig mc = model::LoadModelConfig(o.model_dir);
  const ArchNames names = NamesFor(mc.architecture);
  const auto targets = PlanTargets(mc, names, format);

  const loader::Checkpoint ckpt(o.model_dir);
  for (const auto& [name, t] : targets) CheckTarget(ckpt, name, t, format);

  if (fs::exists(out_dir) && fs::equivalent(in_dir, out_dir))
    Fail("--out ", o.out_dir, " is the input folder");
  if (fs::exists(out_dir) && !fs::is_empty(out_dir))
    Fail("--out ", o.out_dir, " exists and is not empty");
  fs::create_directories(out_dir);

  // Tensors by the file they live in, so the output keeps the input's shards.
  std::map<std::string, std::vector<const loader::TensorInfo*>> by_file;
  for (const auto& [name, info] : ckpt.tensors())
    by_file[fs::path(info->file).filename().string()].push_back(info);

  ThreadPool pool(o.threads);
  ordered_json weight_map = ordered_json::object();
  size_t in_bytes = 0, out_bytes = 0, data_bytes = 0;
  for (const auto& [file, infos] : by_file) {
    const auto specs = OutputSpecs(infos, targets, format);
    loader::SafetensorsWriter writer((out_dir / file).string(), specs);
    for (const loader::TensorInfo* t : infos) {
      in_bytes += t->num_bytes;
      auto it = targets.find(t->name);
      if (it == targets.end())
        writer.Write(t->name, t->data, t->num_bytes);
      else
        QuantizeOne(*t, it->second, format, pool, writer);
    }
    out_bytes += writer.Finish();
    for (const auto& s : specs) {
      weight_map[s.name] = file;
      data_bytes += s.NumBytes();
    }
  }
  if (fs::exists(in_dir / "model.safetensors.index.json")) {
    std::map<std::string, std::string> sorted;
    for (const auto& [name, file] : weight_map.items()) sorted[name] = file.get<std::string>();
    ordered_json index = {{"metadata", {{"total_size", data_bytes}}}, {"weight_map", sorted}};
    WriteJson(out_dir / "model.safetensors.index.json", index);
  }
  config["quantization_config"] = QuantizationConfig(format, names);
  WriteJson(out_dir / "config.json", config);

  // Tokenizer, generation config, chat template, license...: everything that is not a weight.
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    const std::string fname = entry.path().filename().string();
    if (fname == "config.json" || fname == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors")
      continue;
    fs::copy(entry.path(), out_dir / fname,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  std::printf("quantized %zu linear weights of %s to %s: %zu MiB -> %zu MiB in %s\n",
              targets.size(), mc.architecture.c_str(), o.format.c_str(), in_bytes >> 20,
              out_bytes >> 20, o.out_dir.c_str());
  return 0;
}

CommandRegistration reg{
    "quantize",
    "Quantize a bf16 checkpoint to FP8-block (MiniMax-M2 release layout) or MXFP4 (AMD Quark "
    "layout)",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<QuantizeOptions>();
      sub.add_option("--model", o->model_dir, "bf16 checkpoint folder")->required();
      sub.add_option("--out", o->out_dir, "Output folder (created; must be empty)")->required();
      sub.add_option("--format", o->format, "fp8-block or mxfp4")
          ->required()
          ->check(CLI::IsMember({"fp8-block", "mxfp4"}));
      sub.add_option("--threads", o->threads, "Worker threads (default: all cores)");
      return [o] { return RunQuantize(*o); };
    }};

}  // namespace
}  // namespace moeserve::apps
