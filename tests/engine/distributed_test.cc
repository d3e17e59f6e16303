// Unit test of the step broadcast (engine/distributed.h) between two ranks in one process: rank 0's
// StepBroadcaster and a RunWorker thread, joined by an in-memory Broadcast. A follower rank must
// run exactly rank 0's batch, logits rows included (a model may run its last layer only on
// those rows, and every rank must run the same rows or their collectives stop matching), without
// an LM head (logits null).
#include "engine/distributed.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/kv_pool.h"
#include "tiny_model.h"

namespace moeserve::engine {
namespace {

// Rank 0's broadcasts, queued for rank 1 (the only collective the step broadcast uses).
struct Mailbox {
  std::mutex mu;
  std::condition_variable ready;
  std::deque<std::vector<uint8_t>> messages;
};

class MailboxCommunicator final : public dist::Communicator {
 public:
  MailboxCommunicator(Mailbox& box, int rank) : box_(box), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void AllReduceSum(float*, size_t) override { FAIL() << "not used by the step broadcast"; }
  void AllReduceSum(bf16*, size_t) override { FAIL() << "not used by the step broadcast"; }
  void AllGather(const void*, void*, size_t) override { FAIL() << "not used"; }
  void Barrier() override { FAIL() << "not used"; }
  double SecondsInCollectives() const override { return 0; }
  void Broadcast(void* data, size_t bytes, int root) override {
    ASSERT_EQ(root, 0);
    std::unique_lock<std::mutex> lock(box_.mu);
    if (rank_ == 0) {
      const auto* p = static_cast<const uint8_t*>(data);
      box_.messages.emplace_back(p, p + bytes);
      box_.ready.notify_all();
      return;
    }
    box_.ready.wait(lock, [&] { return !box_.messages.empty(); });
    ASSERT_EQ(box_.messages.front().size(), bytes);
    std::memcpy(data, box_.messages.front().data(), bytes);
    box_.messages.pop_front();
  }

 private:
  Mailbox& box_;
  int rank_;
};

// Records what each Forward was given.
class RecordingModel final : public TinyModel {
 public:
  struct Step {
    std::vector<int32_t> token_ids, logits_rows;
    std::vector<std::pair<size_t, size_t>> slices;  // (num_new_tokens, context_len)
    std::vector<std::vector<int32_t>> tables;
    bool has_logits = false;
  };

  RecordingModel() : TinyModel(16) {}
  void Forward(const model::Batch& batch, model::KvStorage&, float* logits) override {
    Step s{batch.token_ids, batch.logits_rows, {}, {}, logits != nullptr};
    for (const model::SequenceSlice& q : batch.seqs) {
      s.slices.push_back({q.num_new_tokens, q.context_len});
      s.tables.emplace_back(q.block_table.begin(), q.block_table.end());
    }
    steps.push_back(std::move(s));
  }

  std::vector<Step> steps;
};

TEST(StepBroadcast, FollowerRunsRankZerosBatchWithItsLogitsRowsAndNoLmHead) {
  Mailbox box;
  MailboxCommunicator comm0(box, 0), comm1(box, 1);
  RecordingModel follower;
  std::thread worker([&] { RunWorker(follower, comm1); });

  auto leader_model = std::make_unique<RecordingModel>();
  RecordingModel* leader = leader_model.get();
  cache::KvPool kv(leader->kv_layout(), 4, 8);
  const std::vector<int32_t> table_a = {3, 1}, table_b = {5};
  std::vector<RecordingModel::Step> leader_steps;  // the broadcaster owns (and ends) the model
  {
    StepBroadcaster broadcaster(std::move(leader_model), comm0);
    // A prefill chunk of 5 tokens (last row wanted) beside a decode token, then a step that wants
    // no logits at all (a prefill chunk before a prompt's last).
    model::Batch step1;
    step1.token_ids = {7, 8, 9, 10, 11, 2};
    step1.seqs = {{5, 0, table_a}, {1, 3, table_b}};
    step1.logits_rows = {4, 5};
    std::vector<float> logits(2 * 16);
    broadcaster.Forward(step1, kv, logits.data());
    model::Batch step2;
    step2.token_ids = {12, 13};
    step2.seqs = {{2, 5, table_a}};
    broadcaster.Forward(step2, kv, nullptr);
    leader_steps = leader->steps;
  }  // the broadcaster's destructor tells the worker to stop
  worker.join();

  ASSERT_EQ(leader_steps.size(), 2u);
  ASSERT_EQ(follower.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const RecordingModel::Step &a = leader_steps[i], &b = follower.steps[i];
    EXPECT_EQ(b.token_ids, a.token_ids) << "step " << i;
    EXPECT_EQ(b.slices, a.slices) << "step " << i;
    EXPECT_EQ(b.tables, a.tables) << "step " << i;
    EXPECT_EQ(b.logits_rows, a.logits_rows) << "step " << i;
    EXPECT_FALSE(b.has_logits) << "step " << i << ": a follower runs no LM head";
  }
  EXPECT_EQ(follower.steps[0].logits_rows, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(follower.steps[1].logits_rows.empty());
  EXPECT_TRUE(leader_steps[0].has_logits);
}

}  // namespace
}  // namespace moeserve::engine
