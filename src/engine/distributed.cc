#include "engine/distributed.h"

#include <cstdint>
#include <vector>

#include "cache/kv_pool.h"
#include "core/check.h"

namespace moeserve::engine {
namespace {

// One step on the wire: a fixed header, then one int64 payload.
//   header: kind, block_size, num_blocks, kv dtype, num_tokens, num_seqs, payload_len
//   payload: token ids [num_tokens]; per sequence: num_new_tokens, context_len, table_len, table;
//            then the logits rows (the rest of the payload: every rank runs the model's last
//            layer on the same rows, see Model::Forward).
enum : int64_t { kStop = 0, kStep = 1 };
constexpr size_t kHeaderLen = 7;

void SendHeader(dist::Communicator& comm, std::vector<int64_t> header) {
  comm.Broadcast(header.data(), header.size() * sizeof(int64_t), 0);
}

}  // namespace

StepBroadcaster::StepBroadcaster(std::unique_ptr<model::Model> inner, dist::Communicator& comm)
    : inner_(std::move(inner)), comm_(comm) {}

StepBroadcaster::~StepBroadcaster() {
  SendHeader(comm_, {kStop, 0, 0, 0, 0, 0, 0});
}

void StepBroadcaster::Forward(const model::Batch& batch, model::KvStorage& kv, float* logits) {
  std::vector<int64_t> payload(batch.token_ids.begin(), batch.token_ids.end());
  for (const model::SequenceSlice& s : batch.seqs) {
    payload.push_back(static_cast<int64_t>(s.num_new_tokens));
    payload.push_back(static_cast<int64_t>(s.context_len));
    payload.push_back(static_cast<int64_t>(s.block_table.size()));
    payload.insert(payload.end(), s.block_table.begin(), s.block_table.end());
  }
  payload.insert(payload.end(), batch.logits_rows.begin(), batch.logits_rows.end());
  const auto* pool = dynamic_cast<const cache::KvPool*>(&kv);
  MOESERVE_CHECK(pool, "distributed steps need a cache::KvPool");
  SendHeader(
      comm_,
      {kStep, static_cast<int64_t>(kv.block_size()), static_cast<int64_t>(pool->num_blocks()),
       static_cast<int64_t>(pool->dtype()), static_cast<int64_t>(batch.token_ids.size()),
       static_cast<int64_t>(batch.seqs.size()), static_cast<int64_t>(payload.size())});
  comm_.Broadcast(payload.data(), payload.size() * sizeof(int64_t), 0);
  inner_->Forward(batch, kv, logits);
}

void RunWorker(model::Model& model, dist::Communicator& comm) {
  std::unique_ptr<cache::KvPool> kv;
  std::vector<std::vector<int32_t>> tables;
  for (;;) {
    int64_t header[kHeaderLen];
    comm.Broadcast(header, sizeof header, 0);
    if (header[0] == kStop) return;
    MOESERVE_CHECK(header[0] == kStep, "unknown message ", header[0]);
    const auto block_size = static_cast<size_t>(header[1]);
    const auto num_blocks = static_cast<size_t>(header[2]);
    const auto dtype = static_cast<DType>(header[3]);
    if (!kv || kv->block_size() != block_size || kv->num_blocks() != num_blocks ||
        kv->dtype() != dtype) {
      model::KvLayout layout = model.kv_layout();
      layout.dtype = dtype;
      kv = std::make_unique<cache::KvPool>(layout, block_size, num_blocks);
    }
    std::vector<int64_t> payload(static_cast<size_t>(header[6]));
    comm.Broadcast(payload.data(), payload.size() * sizeof(int64_t), 0);

    model::Batch batch;
    const auto num_tokens = static_cast<size_t>(header[4]);
    batch.token_ids.assign(payload.begin(), payload.begin() + num_tokens);
    size_t at = num_tokens;
    tables.assign(static_cast<size_t>(header[5]), {});
    for (auto& table : tables) {
      model::SequenceSlice s;
      s.num_new_tokens = static_cast<size_t>(payload[at++]);
      s.context_len = static_cast<size_t>(payload[at++]);
      const auto len = static_cast<size_t>(payload[at++]);
      table.assign(payload.begin() + at, payload.begin() + at + len);
      at += len;
      s.block_table = table;
      batch.seqs.push_back(s);
    }
    batch.logits_rows.assign(payload.begin() + at, payload.end());
    // No logits: the LM head is replicated and only rank 0 samples.
    model.Forward(batch, *kv, nullptr);
  }
}

}  // namespace moeserve::engine
