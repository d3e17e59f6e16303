#include "engine/prompt_logits.h"

#include "cache/kv_pool.h"

namespace moeserve::engine {

std::vector<float> ComputePromptLogits(model::Model& model,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       DType kv_dtype) {
  constexpr size_t kBlockSize = 16;
  std::vector<std::vector<int32_t>> tables(prompts.size());
  int32_t next_block = 0;
  model::Batch batch;
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (size_t b = 0; b < (prompts[s].size() + kBlockSize - 1) / kBlockSize; ++b)
      tables[s].push_back(next_block++);
    for (size_t i = 0; i < prompts[s].size(); ++i)
      batch.logits_rows.push_back(static_cast<int32_t>(batch.token_ids.size() + i));
    batch.token_ids.insert(batch.token_ids.end(), prompts[s].begin(), prompts[s].end());
  }
  for (size_t s = 0; s < prompts.size(); ++s)
    batch.seqs.push_back({prompts[s].size(), 0, tables[s]});
  model::KvLayout layout = model.kv_layout();
  layout.dtype = kv_dtype;
  cache::KvPool kv(layout, kBlockSize, std::max<int32_t>(next_block, 1));
  std::vector<float> logits(batch.logits_rows.size() * model.config().vocab_size);
  model.Forward(batch, kv, logits.data());
  return logits;
}

}  // namespace moeserve::engine
