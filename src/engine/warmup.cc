// LLMEngine::WarmUp: one forward step of the largest shape the scheduler can build, before the
// first request (vLLM's profile run does the same on GPUs). Every buffer a step sizes by its
// tokens (activations, kernel scratch, logits rows) reaches its peak here, so the server's idle
// RSS after start-up already is its RSS under load (the soak benchmark's idle-RSS bound relies on
// it) and the first full-budget step of real traffic pays no allocation or page faults.
#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "engine/llm_engine.h"

namespace moeserve::engine {

void LLMEngine::WarmUp() {
  const SchedulerConfig& c = scheduler_.config();
  const size_t bs = c.block_size;
  const size_t blocks_total = kv_.num_blocks();
  // The whole token budget of a step (not one sequence's max_model_len: the scheduler batches
  // several prompts up to max_num_batched_tokens, and the soak's bursts of arrivals did, growing
  // the MoE buffers to twice their warm-up size): prompts of at most max_model_len (the first
  // one as long as it can be: the most keys attention sees in one step) plus single-token
  // sequences for the most logits rows a step can have, within the sequences and the KV blocks
  // (all free: no request has arrived yet).
  size_t tokens = std::min(c.max_num_batched_tokens, blocks_total * bs);
  if (tokens == 0 || c.max_model_len == 0 || c.max_num_seqs == 0) return;
  // The prompts' lengths for `long_tokens` tokens.
  auto prompts_for = [&](size_t long_tokens) {
    std::vector<size_t> lens;
    for (size_t left = long_tokens; left > 0; left -= lens.back())
      lens.push_back(std::min(left, c.max_model_len));
    return lens;
  };
  auto fits = [&](size_t total, size_t shorts) {
    const std::vector<size_t> lens = prompts_for(total - shorts);
    size_t blocks = shorts;
    for (size_t len : lens) blocks += (len + bs - 1) / bs;
    return blocks <= blocks_total && lens.size() + shorts <= c.max_num_seqs;
  };
  size_t short_seqs = std::min(c.max_num_seqs, tokens) - 1;
  while (short_seqs > 0 && !fits(tokens, short_seqs)) --short_seqs;
  while (tokens > 1 && !fits(tokens, 0)) --tokens;
  const std::vector<size_t> long_lens = prompts_for(tokens - short_seqs);

  std::vector<std::vector<int32_t>> tables;
  int32_t next_block = 0;
  auto table_for = [&](size_t len) {
    std::vector<int32_t> t((len + bs - 1) / bs);
    for (int32_t& b : t) b = next_block++;
    return t;
  };
  for (size_t len : long_lens) tables.push_back(table_for(len));
  for (size_t i = 0; i < short_seqs; ++i) tables.push_back(table_for(1));

  model::Batch batch;
  batch.token_ids.assign(tokens, 0);
  size_t row = 0;
  for (size_t i = 0; i < long_lens.size(); ++i) {
    batch.seqs.push_back({long_lens[i], 0, tables[i]});
    row += long_lens[i];
    batch.logits_rows.push_back(static_cast<int32_t>(row - 1));
  }
  for (size_t i = 0; i < short_seqs; ++i) {
    batch.seqs.push_back({1, 0, tables[long_lens.size() + i]});
    batch.logits_rows.push_back(static_cast<int32_t>(row++));
  }
  const auto t0 = std::chrono::steady_clock::now();
  logits_.resize(batch.logits_rows.size() * model_.config().vocab_size);
  // The K/V it writes land in free blocks, which every sequence overwrites before reading.
  model_.Forward(batch, kv_, logits_.data());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LogInfo("warm-up step: ", tokens, " tokens (", long_lens.size(), " prompts of ",
          long_lens.front(), " tokens or fewer + ", short_seqs, " one-token sequences) in ", s,
          " s");
}

}  // namespace moeserve::engine
