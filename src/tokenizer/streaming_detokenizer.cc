#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tok_(tokenizer), skip_special_(skip_special_tokens) {}

// Emits every character whose bytes are complete, and U+FFFD for each invalid run, exactly as
// the lossy conversion of the whole byte stream would; keeps a truncated tail unless `final`.
std::string StreamingDetokenizer::DrainByteLevel(bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending_bytes_.size()) {
    int c = ClassifyUtf8(pending_bytes_, pos);
    if (c > 0) {
      out.append(pending_bytes_, pos, size_t(c));
      pos += size_t(c);
    } else if (c < 0) {
      out += "\xEF\xBF\xBD";
      pos += size_t(-c);
    } else if (final) {
      out += "\xEF\xBF\xBD";
      pos = pending_bytes_.size();
    } else {
      break;
    }
  }
  pending_bytes_.erase(0, pos);
  return out;
}

std::string StreamingDetokenizer::Push(int32_t id) {
  if (!tok_.byte_level_bytes_.empty()) {
    if (tok_.SkipOnDecode(id, skip_special_)) return {};
    pending_bytes_ += tok_.byte_level_bytes_[size_t(id)];
    return DrainByteLevel(false);
  }
  // Generic decoders may depend on neighbouring tokens: decode the stream and return the new
  // suffix. A trailing run of <0xNN> byte tokens is held back whole (ByteFallback turns the run
  // into U+FFFD per byte when the run as a whole is invalid UTF-8, which can change text that
  // looked final), and so are trailing U+FFFD.
  ids_.push_back(id);
  size_t settled = ids_.size();
  while (settled > 0) {
    // Ids that Decode drops (unknown, skipped specials) do not end a byte run.
    const int32_t last = ids_[settled - 1];
    const std::string* t = tok_.DecodeToken(last);
    bool dropped = tok_.SkipOnDecode(last, skip_special_) || !t;
    if (!dropped && (t->size() != 6 || !t->starts_with("<0x") || (*t)[5] != '>')) break;
    --settled;
  }
  std::string text = tok_.Decode(std::span<const int32_t>(ids_.data(), settled), skip_special_);
  size_t stable = text.size();
  while (stable >= 3 && text.compare(stable - 3, 3, "\xEF\xBF\xBD") == 0) stable -= 3;
  if (stable <= emitted_.size() || text.compare(0, emitted_.size(), emitted_) != 0) return {};
  std::string out = text.substr(emitted_.size(), stable - emitted_.size());
  emitted_.append(out);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  if (!tok_.byte_level_bytes_.empty()) return DrainByteLevel(true);
  std::string text = tok_.Decode(ids_, skip_special_);
  // Text already returned cannot be taken back; emit what follows it (the common case: all).
  std::string out = text.starts_with(emitted_) ? text.substr(emitted_.size()) : std::string();
  emitted_.append(out);
  return out;
}

}  // namespace moeserve::tokenizer
