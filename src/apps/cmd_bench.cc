// moeserve bench: prefill and decode throughput of a model on this machine, printed beside the
// machine's measured roofline (read bandwidth, bf16 FMA peak), medians of several runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "apps/command_registry.h"
#include "apps/model_options.h"
#include "apps/model_session.h"
#include "cache/kv_pool.h"
#include "client/bench_serve.h"
#include "core/check.h"
#include "kernels/roofline.h"
#include "loader/json_config.h"
#include "loader/quant_config.h"

namespace moeserve::apps {
namespace {

struct BenchOptions {
  ModelOptions model;
  ParallelOptions parallel;
  size_t prompt_len = 512;
  size_t decode_tokens = 32;
  size_t runs = 3;
  size_t decode_batch = 1;  // > 1: also decode this many sequences together (a serving step)
  // The batched sequences' input tokens: "distinct" (sequence b feeds (b + i) mod vocab at step
  // i, so their routes differ as real clients' do) or "same" (every sequence feeds token 0, as
  // ik_llama.cpp's llama-batched-bench does: all route to the same experts), or "both".
  std::string batch_tokens = "distinct";
  std::string kv_cache_dtype = "auto";
  bool profile = false;  // time the steps' phases (model/step_profile.h) and print where time goes
};

// The phases of a kind of step (prefill or decode), summed over the timed runs.
struct PhaseTotals {
  model::StepProfile sum;
  double step_seconds = 0;  // the whole steps' time, phases and the rest
  size_t steps = 0;

  void Add(const model::StepProfile& p, double seconds, size_t num_steps) {
    for (size_t i = 0; i < model::kPhases; ++i) {
      sum.seconds[i] += p.seconds[i];
      sum.bytes[i] += p.bytes[i];
      sum.flops[i] += p.flops[i];
    }
    step_seconds += seconds;
    steps += num_steps;
  }
};

// The compute peaks (rank 0's threads) a prefill's phases are measured against: the GEMMs' path's
// (bf16 FMAs, or the AMX tile unit's), the experts' (the int8 dot peak for MXFP4 x int8 experts)
// and attention's (its tile's f32 FMAs; on AMX three bf16 tile products per f32 one).
struct PhasePeaks {
  double gemm = 0, experts = 0, attention = 0;  // GFLOP/s (GOP/s)
  const char *gemm_name = "", *experts_name = "", *attention_name = "";
};

// One line per phase: time per step, its share of the step, and then for phases that read weights
// the bytes per step and the bandwidth they streamed at against the read probe, or, given peaks
// (a prefill: bound by its arithmetic, not its bytes), the phase's operations per second against
// the peak of the units it runs on.
// pass_gbps: the median of the probe passes run between these steps (0: none were), a second
// reference for the phases that read weights.
void PrintPhases(const char* title, const PhaseTotals& t, double read_gbps, double pass_gbps = 0,
                 const PhasePeaks* peaks = nullptr) {
  if (t.steps == 0) return;
  const double per_step = t.step_seconds / static_cast<double>(t.steps);
  std::printf("%s: %.3f ms per step, mean of %zu steps (rank 0)\n", title, per_step * 1e3, t.steps);
  double phases = 0;
  for (size_t i = 0; i < model::kPhases; ++i) {
    const auto phase = static_cast<model::Phase>(i);
    const double s = t.sum.seconds[i] / static_cast<double>(t.steps);
    const double bytes = t.sum.bytes[i] / static_cast<double>(t.steps);
    const double flops = t.sum.flops[i] / static_cast<double>(t.steps);
    phases += s;
    std::printf("  %-26s %8.3f ms %5.1f%%", model::PhaseName(phase), s * 1e3, 100 * s / per_step);
    if (peaks && flops > 0 && s > 0) {
      const bool experts = phase == model::Phase::kExperts;
      const bool attention = phase == model::Phase::kAttention;
      const double peak = experts ? peaks->experts : attention ? peaks->attention : peaks->gemm;
      const char* name = experts     ? peaks->experts_name
                         : attention ? peaks->attention_name
                                     : peaks->gemm_name;
      std::printf("  %8.4g GFLOP  %6.1f GFLOP/s = %3.0f%% of the %s", flops / 1e9, flops / s / 1e9,
                  100 * flops / s / 1e9 / peak, name);
    } else if (bytes > 0 && s > 0) {
      std::printf("  %8.1f MB  %6.1f GB/s = %3.0f%% of the read probe", bytes / 1e6,
                  bytes / s / 1e9, 100 * bytes / s / 1e9 / read_gbps);
      if (pass_gbps > 0)
        std::printf(", %3.0f%% of the passes between steps", 100 * bytes / s / 1e9 / pass_gbps);
    }
    std::printf("\n");
  }
  const double rest = per_step - phases;
  std::printf("  %-26s %8.3f ms %5.1f%%\n", "other (norms, residual)", rest * 1e3,
              100 * rest / per_step);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Multiply-adds x2 per prompt token of a prefill of `t` tokens: projections, router, the top-k
// experts, and causal attention (QK and PV over on average (t+1)/2 keys). The LM head runs for the
// last token only and is left out; so do the last layer's router and experts (the model runs its
// last MoE only on the rows whose logits are wanted: MoeTransformer::KeepLogitsRows).
// A prompt token's operations (2 per multiply-add): the routed experts', and the rest (attention
// projections and scores, router).
struct PrefillOps {
  double experts = 0, rest = 0;
  double total() const { return experts + rest; }
};

PrefillOps PrefillOpsPerToken(const model::ModelConfig& c, size_t t) {
  const double h = c.hidden_size, qw = c.q_width(), kw = c.kv_width();
  const double proj = 2 * h * (qw + 2 * kw) + 2 * qw * h;
  const double router = 2 * h * c.num_experts;
  const double experts = c.num_experts_per_token * 3.0 * 2 * h * c.expert_intermediate_size;
  const double attn = 2.0 * 2 * qw * (t + 1) / 2.0;
  const double moe_layers = c.num_layers == 0 || t == 0 ? 0 : c.num_layers - 1 + 1.0 / t;
  return {moe_layers * experts, c.num_layers * (proj + attn) + moe_layers * router};
}

// Do the experts run as MXFP4 x int8 (an MXFP4 checkpoint with int8 activations)?
bool Int8Experts(const ModelOptions& mo) {
  if (mo.activation_dtype == "bf16") return false;
  const loader::QuantConfig q = loader::ParseQuantConfig(
      loader::JsonConfig::FromFile((std::filesystem::path(mo.model_dir) / "config.json").string()));
  return q.method == loader::QuantMethod::kMxfp4 &&
         (q.IsQuantized("model.layers.0.block_sparse_moe.experts.0.w1") ||
          q.IsQuantized("model.layers.0.mlp.experts.0.gate_proj"));
}

// Whether the AMX ISA runs the model's dense GEMMs on the tile unit: FP8 always (its GEMM reads
// the checkpoint's rows or panels), bf16 when repacked into panels (not --weight-layout
// checkpoint). `rest_only`: the GEMMs besides MXFP4 experts (the bf16 attention projections).
bool GemmsOnTiles(const ModelOptions& mo, bool rest_only) {
  const loader::QuantConfig q = loader::ParseQuantConfig(
      loader::JsonConfig::FromFile((std::filesystem::path(mo.model_dir) / "config.json").string()));
  if (q.method == loader::QuantMethod::kFp8Block) return true;
  if (q.method == loader::QuantMethod::kMxfp4 && !rest_only) return false;
  return mo.weight_layout == "auto";
}

int RunBench(const BenchOptions& o) {
  auto session = ModelSession::Open(o.model, o.parallel);
  if (session->is_worker()) return 0;
  model::Model* model = &session->model();
  ThreadPool& pool = session->pool();
  model::StepProfile& profile = session->profile();
  profile.enabled = o.profile;
  PhaseTotals prefill_phases, decode_phases, batch_phases;  // batch: the first batch mode's
  dist::Communicator& comm = session->comm();
  const auto& cfg = model->config();
  const size_t block_size = 16, vocab = cfg.vocab_size;
  const size_t max_len = o.prompt_len + o.decode_tokens + 1;
  std::vector<int32_t> table((max_len + block_size - 1) / block_size);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  // Batched decode: B sequences share the prompt's full blocks (read only) and each gets private
  // blocks from the prompt's partial block on, so no prompt is computed more than once.
  const size_t shared_blocks = o.prompt_len / block_size;
  const size_t private_blocks = table.size() - shared_blocks;
  std::vector<std::vector<int32_t>> batch_tables(o.decode_batch > 1 ? o.decode_batch : 0);
  for (size_t b = 0; b < batch_tables.size(); ++b) {
    batch_tables[b].assign(table.begin(), table.begin() + shared_blocks);
    for (size_t i = 0; i < private_blocks; ++i)
      batch_tables[b].push_back(static_cast<int32_t>(table.size() + b * private_blocks + i));
  }
  model::KvLayout layout = model->kv_layout();
  layout.dtype = ParseKvCacheDtype(o.kv_cache_dtype);
  cache::KvPool kv(layout, block_size, table.size() + batch_tables.size() * private_blocks);

  std::printf(
      "moeserve bench: %s, %zu layers, hidden %zu, %zu experts top-%zu, %zu threads x %d rank(s)\n",
      o.model.model_dir.c_str(), cfg.num_layers, cfg.hidden_size, cfg.num_experts,
      cfg.num_experts_per_token, pool.num_threads(), comm.size());

  std::mt19937 rng(1234);
  std::vector<int32_t> prompt(o.prompt_len);
  for (auto& id : prompt) id = static_cast<int32_t>(rng() % vocab);
  std::vector<float> logits(vocab);
  std::vector<double> prefill_tps, decode_tps, prefill_comm, decode_comm;
  // The roofline is measured again before every run: on a shared machine the bandwidth and the
  // compute left to this process drift over minutes, and a figure is only comparable with the
  // roofline of the same moment. Medians of both are reported.
  std::vector<double> read_gbps, bf16_gflops, f32_gflops, int8_gops, tile_gflops;
  std::vector<std::string> batch_modes;
  if (o.batch_tokens != "same") batch_modes.push_back("distinct");
  if (o.batch_tokens != "distinct") batch_modes.push_back("same");
  std::vector<std::vector<double>> batch_step_s(batch_modes.size());  // per mode
  // One read-probe pass after every timed decode step: the bandwidth of the same moments, which
  // on a shared machine can differ from the best pass of the roofline's probe by half.
  kernels::ReadBandwidthProbe probe(session->kernels());
  std::vector<double> step_probe_gbps;
  // Compute peaks sustained over a fifth of a second right after each timed prefill: the peak of
  // the same moments (the roofline's best millisecond, taken before the run, can be a third
  // above what the cores give over the prefill's second).
  std::vector<kernels::Roofline> after_prefill;
  for (size_t run = 0; run < o.runs + 1; ++run) {  // run 0 warms caches and page tables
    if (run > 0) {
      const kernels::Roofline roof = kernels::MeasureRoofline(session->kernels(), &probe);
      read_gbps.push_back(roof.read_gbps);
      bf16_gflops.push_back(roof.bf16_fma_gflops);
      tile_gflops.push_back(roof.bf16_tile_gflops);
      f32_gflops.push_back(roof.f32_fma_gflops);
      int8_gops.push_back(roof.int8_dot_gops);
    }
    model::Batch prefill;
    prefill.token_ids = prompt;
    prefill.seqs.push_back({prompt.size(), 0, table});
    prefill.logits_rows = {static_cast<int32_t>(prompt.size() - 1)};
    profile.Reset();
    double c0 = comm.SecondsInCollectives(), t0 = Now();
    model->Forward(prefill, kv, logits.data());
    const double prefill_s = Now() - t0, prefill_c = comm.SecondsInCollectives() - c0;
    if (run > 0 && o.profile) prefill_phases.Add(profile, prefill_s, 1);
    if (run > 0) after_prefill.push_back(kernels::MeasureSustainedCompute(session->kernels(), 0.2));

    int32_t token = 0;
    profile.Reset();
    c0 = comm.SecondsInCollectives();
    double decode_s = 0;  // the steps' own time, without the probe passes between them
    for (size_t i = 0; i < o.decode_tokens; ++i) {
      model::Batch step;
      step.token_ids = {token};
      step.seqs.push_back({1, prompt.size() + i, table});
      step.logits_rows = {0};
      t0 = Now();
      model->Forward(step, kv, logits.data());
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      decode_s += Now() - t0;
      if (run > 0) step_probe_gbps.push_back(probe.PassGbps());
    }
    const double decode_c = comm.SecondsInCollectives() - c0;
    if (run > 0 && o.profile) decode_phases.Add(profile, decode_s, o.decode_tokens);

    if (!batch_tables.empty()) {
      // The prompt's partial last block, if any, is copied into every sequence's private block by
      // recomputing those few tokens per sequence (one small batched prefill).
      const size_t tail = o.prompt_len - shared_blocks * block_size;
      model::Batch fill;
      for (auto& bt : batch_tables) {
        if (tail == 0) break;
        fill.token_ids.insert(fill.token_ids.end(), prompt.end() - tail, prompt.end());
        fill.seqs.push_back({tail, shared_blocks * block_size, bt});
      }
      if (!fill.seqs.empty()) {
        fill.logits_rows = {static_cast<int32_t>(tail - 1)};
        profile.enabled = false;
        model->Forward(fill, kv, logits.data());
      }
      std::vector<float> batch_logits(batch_tables.size() * vocab);
      for (size_t mode = 0; mode < batch_modes.size(); ++mode) {
        const bool same = batch_modes[mode] == "same";
        profile.enabled = o.profile && mode == 0;  // the first mode's steps only
        profile.Reset();
        const double tb = Now();
        for (size_t i = 0; i < o.decode_tokens; ++i) {
          model::Batch step;
          for (size_t b = 0; b < batch_tables.size(); ++b) {
            step.token_ids.push_back(same ? 0 : static_cast<int32_t>((b + i) % vocab));
            step.seqs.push_back({1, prompt.size() + i, batch_tables[b]});
            step.logits_rows.push_back(static_cast<int32_t>(b));
          }
          model->Forward(step, kv, batch_logits.data());
        }
        if (run > 0) batch_step_s[mode].push_back((Now() - tb) / o.decode_tokens);
        if (run > 0 && profile.enabled) batch_phases.Add(profile, Now() - tb, o.decode_tokens);
      }
    }
    profile.enabled = o.profile;
    if (run == 0) continue;
    prefill_comm.push_back(prefill_c / prefill_s);
    decode_comm.push_back(decode_c / decode_s);
    prefill_tps.push_back(prompt.size() / prefill_s);
    decode_tps.push_back(o.decode_tokens / decode_s);
    std::printf(
        "  run %zu: prefill %.1f tok/s, decode %.2f tok/s  (roofline: read %.1f GB/s, bf16 %.0f "
        "GFLOP/s)\n",
        run, prefill_tps.back(), decode_tps.back(), read_gbps.back(), bf16_gflops.back());
  }
  const double p = Median(prefill_tps), d = Median(decode_tps);
  kernels::Roofline roof;
  roof.read_gbps = Median(read_gbps);
  roof.bf16_fma_gflops = Median(bf16_gflops);
  roof.f32_fma_gflops = Median(f32_gflops);
  roof.int8_dot_gops = Median(int8_gops);
  roof.bf16_tile_gflops = Median(tile_gflops);
  const PrefillOps ops = PrefillOpsPerToken(cfg, o.prompt_len);
  const double flops = ops.total();
  const double bytes = static_cast<double>(model->DecodeBytesPerToken());
  // The prompt's FLOPs are the whole model's, shared by all ranks; the probes ran on rank 0's
  // threads only, so with several ranks the peak compared against is rank 0's times their number.
  const double gflops = p * flops / 1e9, gbps = d * bytes / 1e9;
  // The bf16 peak of the path the GEMMs take: the AMX tile unit's for bf16 panels where the ISA
  // has one, else the bf16 dot instruction's.
  const bool int8_experts = Int8Experts(o.model) && roof.int8_dot_gops > 0;
  const bool on_tiles = roof.bf16_tile_gflops > 0 && GemmsOnTiles(o.model, int8_experts);
  const char* bf16_peak_name = on_tiles ? "bf16 peak (AMX tiles)" : "bf16 peak";
  // The bf16 peak of roofline r for the path the GEMMs take (rank 0's threads).
  auto bf16_peak_of = [&](const kernels::Roofline& r) {
    return on_tiles ? r.bf16_tile_gflops : r.bf16_fma_gflops;
  };
  // The prompt's seconds per token at roofline r: with int8 experts, the experts' int8 operations
  // at the int8 dot peak and the rest at the bf16 peak, else all at the bf16 peak.
  auto roofline_s_per_token = [&](const kernels::Roofline& r) {
    const double bf16_peak = bf16_peak_of(r) * comm.size();
    if (!int8_experts) return ops.total() / (bf16_peak * 1e9);
    return ops.experts / (r.int8_dot_gops * comm.size() * 1e9) + ops.rest / (bf16_peak * 1e9);
  };
  const double all_ranks_peak = bf16_peak_of(roof) * comm.size();
  std::printf(
      "\nmachine (medians of the per-run probes): read bandwidth %.1f GB/s, bf16 FMA peak %.0f "
      "GFLOP/s, f32 FMA peak %.0f GFLOP/s, int8 dot peak %.0f GOP/s",
      roof.read_gbps, roof.bf16_fma_gflops, roof.f32_fma_gflops, roof.int8_dot_gops);
  if (roof.bf16_tile_gflops > 0)
    std::printf(", bf16 AMX tile peak %.0f GFLOP/s", roof.bf16_tile_gflops);
  std::printf("\n");
  if (int8_experts) {
    // The experts' int8 operations at the int8 peak, the rest at the bf16 peak: the prompt's
    // time at the roofline, and the share of it achieved.
    const double peak_s = roofline_s_per_token(roof);
    std::printf(
        "prefill (%zu-token prompt): %.1f tok/s = %.1f GOP/s (experts int8, the rest bf16) = "
        "%.0f%% of the roofline (experts at the int8 dot peak, the rest at the %s: %.0f "
        "tok/s)%s  [median of %zu]\n",
        o.prompt_len, p, gflops, 100 * p * peak_s, bf16_peak_name, 1 / peak_s,
        comm.size() > 1 ? " (rank 0's x ranks)" : "", o.runs);
  } else {
    std::printf(
        "prefill (%zu-token prompt): %.1f tok/s = %.1f GFLOP/s = %.0f%% of the %s%s  "
        "[median of %zu]\n",
        o.prompt_len, p, gflops, 100 * gflops / all_ranks_peak, bf16_peak_name,
        comm.size() > 1 ? " (rank 0's x ranks)" : "", o.runs);
  }
  if (!after_prefill.empty()) {
    std::vector<double> shares, bf16_peaks;
    for (size_t i = 0; i < after_prefill.size(); ++i) {
      const kernels::Roofline& r = after_prefill[i];
      shares.push_back(prefill_tps[i] * roofline_s_per_token(r));
      bf16_peaks.push_back(bf16_peak_of(r));
    }
    std::printf(
        "prefill against compute probes sustained for 0.2 s right after each prefill (the peaks "
        "of the same moments; %s %.0f GFLOP/s): %.0f%% of that roofline  [median of %zu]\n",
        bf16_peak_name, Median(bf16_peaks), 100 * Median(shares), shares.size());
  }
  std::printf(
      "decode (batch 1): %.2f tok/s; %.1f MB of weights per token -> %.1f GB/s = %.0f%% of the "
      "read bandwidth  [median of %zu]\n",
      d, bytes / 1e6, gbps, 100 * gbps / roof.read_gbps, o.runs);
  const double between = step_probe_gbps.empty() ? 0 : Median(step_probe_gbps);
  if (between > 0) {
    std::printf(
        "decode (batch 1) against a read-probe pass run after each of its steps (the bandwidth of "
        "the same moments): median pass %.1f GB/s, decode %.0f%% of it  [%zu passes]\n",
        between, 100 * gbps / between, step_probe_gbps.size());
  }
  for (size_t mode = 0; mode < batch_modes.size(); ++mode) {
    if (batch_step_s[mode].empty()) continue;
    const double step = Median(batch_step_s[mode]), all = static_cast<double>(model->WeightBytes());
    std::printf(
        "decode (batch %zu): %.1f tok/s, %.1f ms per step (%s tokens); reading all %.0f MB of "
        "weights once takes %.1f ms at the read bandwidth  [median of %zu]\n",
        o.decode_batch, o.decode_batch / step, step * 1e3, batch_modes[mode].c_str(), all / 1e6,
        all / (roof.read_gbps * 1e9) * 1e3, o.runs);
  }
  if (o.profile) {
    std::printf("\nwhere the time goes (--profile; the timers add a clock read per phase):\n");
    PhasePeaks peaks;
    peaks.gemm = bf16_peak_of(roof);
    peaks.gemm_name = bf16_peak_name;
    peaks.experts = int8_experts ? roof.int8_dot_gops : peaks.gemm;
    peaks.experts_name = int8_experts ? "int8 dot peak" : bf16_peak_name;
    peaks.attention = roof.bf16_tile_gflops > 0 ? roof.bf16_tile_gflops / 3 : roof.f32_fma_gflops;
    peaks.attention_name =
        roof.bf16_tile_gflops > 0 ? "AMX tile peak / 3 (f32 products as 3 bf16)" : "f32 FMA peak";
    PrintPhases("prefill", prefill_phases, roof.read_gbps, 0, &peaks);
    PrintPhases("decode (batch 1)", decode_phases, roof.read_gbps, between);
    if (!batch_modes.empty()) {
      const std::string title =
          "decode (batch " + std::to_string(o.decode_batch) + ", " + batch_modes[0] + " tokens)";
      PrintPhases(title.c_str(), batch_phases, roof.read_gbps);
    }
  }
  if (comm.size() > 1)
    std::printf(
        "rank 0 (bytes above are its shard): time in collectives: prefill %.0f%%, decode %.0f%%\n",
        100 * Median(prefill_comm), 100 * Median(decode_comm));
  return 0;
}

CommandRegistration reg{
    "bench", "Measure prefill and decode throughput against the machine's roofline",
    [](CLI::App& sub) -> CommandAction {
      auto o = std::make_shared<BenchOptions>();
      AddModelOptions(sub, o->model);
      // `bench serve` load-tests a running server and needs no model folder.
      sub.get_option("--model")->required(false);
      auto serve_opts = std::make_shared<client::ServeBenchOptions>();
      CLI::App* serve = sub.add_subcommand(
          "serve", "Load-test an OpenAI-compatible server (like vllm bench serve)");
      client::AddServeBenchOptions(*serve, *serve_opts);
      AddParallelOptions(sub, o->parallel);
      AddKvCacheDtypeOption(sub, o->kv_cache_dtype);
      sub.add_option("--prompt-len", o->prompt_len, "Prefill length")->capture_default_str();
      sub.add_option("--decode-tokens", o->decode_tokens, "Tokens decoded per run")
          ->capture_default_str();
      sub.add_option("--runs", o->runs, "Timed runs (the median is reported)")
          ->capture_default_str();
      sub.add_option("--decode-batch", o->decode_batch,
                     "Also decode this many sequences together (a serving step); 1: only batch 1")
          ->capture_default_str();
      sub.add_option(
             "--batch-tokens", o->batch_tokens,
             "Input tokens of the batched sequences: distinct (each its own, so their "
             "experts differ as real clients' do) or same (all token 0, as ik_llama.cpp's "
             "llama-batched-bench feeds them: every sequence routes to the same experts), or both")
          ->check(CLI::IsMember({"distinct", "same", "both"}))
          ->capture_default_str();
      sub.add_flag("--profile", o->profile,
                   "Also print where prefill and decode steps spend their time (batch 1, and "
                   "with --decode-batch the first batch mode's steps): each phase (projections, "
                   "attention, router, experts, LM head) in ms per step, and the bandwidth of "
                   "those that read weights");
      return [o, serve_opts, serve] {
        if (serve->parsed()) return client::RunServeBenchmark(*serve_opts);
        if (o->model.model_dir.empty()) Fail("bench needs --model (or the `serve` subcommand)");
        if (o->prompt_len == 0 || o->runs == 0 || o->decode_batch == 0)
          Fail("--prompt-len, --runs and --decode-batch must be positive");
        return RunBench(*o);
      };
    }};

}  // namespace
}  // namespace moeserve::apps
