// The model's tokens as the grammar sees them: the bytes each id decodes to, which ids are special
// (never allowed under a grammar), and which ids end generation (allowed exactly when the grammar
// can end). Built once per tokenizer by the server (the engine does not know the tokenizer) and
// shared by every grammar compiled for that model.
//
// Ordinary tokens are also kept sorted by their bytes, with the length of the common prefix of
// each neighbour pair: walking that order pushing and popping bytes is a depth-first walk of the
// vocabulary's byte trie, so tokens that share a prefix share the parsing work for it.
//
// Immutable; safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moeserve::grammar {

class Vocabulary {
 public:
  // `token_bytes[id]`: the bytes of id (as a byte-level decoder yields them). `special[id]` may
  // be shorter than token_bytes (missing means not special). `stop_ids`: EOS / end-of-turn ids;
  // they are treated as special for the bytes and allowed only when the grammar can end. Empty
  // ordinary tokens are never allowed (they would advance nothing).
  Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> special,
             std::vector<int32_t> stop_ids);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_special(int32_t id) const { return rank_[id] < 0; }
  bool is_stop(int32_t id) const;
  std::span<const int32_t> stop_ids() const { return stop_ids_; }

  // Ordinary non-empty tokens by bytes: sorted()[rank] is an id.
  std::span<const int32_t> sorted() const { return sorted_; }
  // lcp()[rank]: common prefix length of sorted()[rank - 1] and sorted()[rank] (0 for rank 0).
  std::span<const uint32_t> lcp() const { return lcp_; }
  // The bytes of sorted()[rank], stored contiguously in rank order (walking them in order then
  // reads memory sequentially instead of chasing 200k separate strings).
  std::string_view sorted_bytes(size_t rank) const {
    return std::string_view(sorted_data_)
        .substr(sorted_offset_[rank], sorted_offset_[rank + 1] - sorted_offset_[rank]);
  }
  // One past the last rank whose token starts with byte `b` (ranks are sorted, so the tokens
  // starting with b are a contiguous run ending there).
  size_t first_byte_end(uint8_t b) const { return first_byte_end_[b]; }
  // Rank of an ordinary token, -1 for special, stop and empty ones.
  int32_t rank(int32_t id) const { return rank_[id]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> sorted_;
  std::vector<uint32_t> lcp_;
  std::string sorted_data_;
  std::vector<uint32_t> sorted_offset_;  // [sorted_.size() + 1]
  std::vector<size_t> first_byte_end_;   // [256]
  std::vector<int32_t> rank_;
};

// The bytes a token of a byte-level BPE vocabulary (GPT-2 / tiktoken style: tokenizer.json with a
// ByteLevel decoder, as GPT-4o, Qwen and MiniMax use) stands for: each code point of the vocab
// string is one byte in GPT-2's printable alphabet. Code points outside it are dropped.
std::string ByteLevelTokenBytes(std::string_view token);

// A set of token ids as 64-bit words (bit id % 64 of word id / 64): what the sampler applies.
using TokenBitmask = std::vector<uint64_t>;
inline size_t BitmaskWords(size_t vocab) {
  return (vocab + 63) / 64;
}
inline bool BitmaskTest(std::span<const uint64_t> mask, int32_t id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}
inline void BitmaskSet(std::span<uint64_t> mask, int32_t id) {
  mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace moeserve::grammar
