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
  // Generic decoders may depend on neighbouring tokens: decode the whole stream and return the
  // new suffix, holding back trailing U+FFFD that later byte tokens could still complete.
  ids_.push_back(id);
  std::string text = tok_.Decode(ids_, skip_special_);
  size_t stable = text.size();
  while (stable >= 3 && text.compare(stable - 3, 3, "\xEF\xBF\xBD") == 0) stable -= 3;
  if (stable <= emitted_chars_) return {};
  std::string out = text.substr(emitted_chars_, stable - emitted_chars_);
  emitted_chars_ = stable;
  return out;
}

std::string StreamingDetokenizer::Flush() {
  if (!tok_.byte_level_bytes_.empty()) return DrainByteLevel(true);
  std::string text = tok_.Decode(ids_, skip_special_);
  std::string out = text.size() > emitted_chars_ ? text.substr(emitted_chars_) : std::string();
  emitted_chars_ = text.size();
  return out;
}

}  // namespace moeserve::tokenizer
