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
  // One long prompt chunk (the most keys attention sees in one step) plus single-token sequences
  // for the most logits rows a step can have, within the token budget, one sequence's length and
  // the KV blocks (all free: no request has arrived yet).
  size_t tokens = std::min({c.max_num_batched_tokens, c.max_model_len, blocks_total * bs});
  size_t short_seqs = std::min(c.max_num_seqs, tokens) - 1;
  while (short_seqs > 0 && (tokens - short_seqs + bs - 1) / bs + short_seqs > blocks_total)
    --short_seqs;
  tokens = std::min(tokens, (blocks_total - short_seqs) * bs + short_seqs);
  if (tokens == 0) return;
  const size_t long_len = tokens - short_seqs;

  std::vector<std::vector<int32_t>> tables;
  int32_t next_block = 0;
  auto table_for = [&](size_t len) {
    std::vector<int32_t> t((len + bs - 1) / bs);
    for (int32_t& b : t) b = next_block++;
    return t;
  };
  tables.push_back(table_for(long_len));
  for (size_t i = 0; i < short_seqs; ++i) tables.push_back(table_for(1));

  model::Batch batch;
  batch.token_ids.assign(tokens, 0);
  batch.seqs.push_back({long_len, 0, tables[0]});
  batch.logits_rows.push_back(static_cast<int32_t>(long_len - 1));
  for (size_t i = 0; i < short_seqs; ++i) {
    batch.seqs.push_back({1, 0, tables[i + 1]});
    batch.logits_rows.push_back(static_cast<int32_t>(long_len + i));
  }
  const auto t0 = std::chrono::steady_clock::now();
  logits_.resize(batch.logits_rows.size() * model_.config().vocab_size);
  // The K/V it writes land in free blocks, which every sequence overwrites before reading.
  model_.Forward(batch, kv_, logits_.data());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LogInfo("warm-up step: ", tokens, " tokens (", long_len, "-token prompt + ", short_seqs,
          " one-token sequences) in ", s, " s");
}

}  // namespace moeserve::engine
