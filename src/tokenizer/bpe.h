// Byte-pair-encoding model of Hugging Face `tokenizers` (models/bpe): vocab + ranked merges,
// continuing_subword_prefix / end_of_word_suffix, unk_token with fuse_unk, byte_fallback (<0xNN>)
// and ignore_merges. Results of whole words are kept in a bounded, thread-safe cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moeserve::tokenizer {

class BpeModel {
 public:
  // `model` is the "model" object of tokenizer.json (type "BPE"). Throws moeserve::Error.
  explicit BpeModel(const nlohmann::json& model);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word. With `byte_level` set, `word` holds raw bytes
  // that still need the GPT-2 byte-to-char mapping (a ByteLevel pre-tokenizer ran last); the
  // mapping is applied only when the word misses the cache.
  void Tokenize(std::string_view word, bool byte_level, std::vector<int32_t>& out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Empty optional when no token has this id.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id.
  size_t IdLimit() const { return id_to_token_.size(); }
  size_t NumTokens() const { return vocab_.size(); }

  // Applies merges to a word split into initial symbols (exposed for tests: both the short-word
  // scan and the heap used for long words must give the same result).
  void MergeSymbols(std::vector<int32_t>& symbols, bool force_heap = false) const;

 private:
  struct MergeEntry {
    uint64_t key;  // (left id << 32) | right id; 0 marks an empty slot (ids are offset by one)
    uint32_t rank;
    int32_t new_id;
  };
  const MergeEntry* FindMerge(int32_t left, int32_t right) const;
  void AddMerge(int32_t left, int32_t right, uint32_t rank, int32_t new_id);
  void MergeWord(std::string_view mapped, std::vector<int32_t>& out) const;
  void MergeScan(std::vector<int32_t>& symbols) const;
  void MergeHeap(std::vector<int32_t>& symbols) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  std::vector<MergeEntry> merges_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;
  std::array<int32_t, 256> byte_ids_;  // id of each byte's byte-level char, -1 when absent

  std::optional<std::string> unk_token_;
  std::optional<std::string> prefix_;  // continuing_subword_prefix
  std::optional<std::string> suffix_;  // end_of_word_suffix
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;

  // Word cache, sharded so that concurrent encoders rarely contend. Bounded: once a shard is
  // full it stops inserting (like the reference), which keeps memory fixed. 10,240 words in all,
  // the reference's capacity (HF tokenizers' DEFAULT_CACHE_CAPACITY, 10,000): a 16x larger
  // cache kept filling with every new word of a long-running server's traffic (+25 MB of idle
  // RSS over 9 minutes of the soak benchmark, still rising), for no measurable speed.
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheEntriesPerShard = 640;
  static constexpr size_t kCacheMaxWordBytes = 256;
  struct CacheShard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  std::unique_ptr<CacheShard[]> cache_;
};

}  // namespace moeserve::tokenizer
