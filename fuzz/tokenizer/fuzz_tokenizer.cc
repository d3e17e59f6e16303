// libFuzzer target: arbitrary bytes through Encode / Decode / StreamingDetokenizer of a real
// byte-level tokenizer (GPT-4o o200k by default; MOESERVE_FUZZ_TOKENIZER overrides the path).
// Checks: no crash or sanitizer report, Decode(Encode(x)) == x for valid UTF-8 (the tokenizer
// has no normalizer), the stream equals Decode, and decoding arbitrary ids never fails.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using moeserve::tokenizer::StreamingDetokenizer;
using moeserve::tokenizer::Tokenizer;

static const Tokenizer& Get() {
  static const Tokenizer tok = [] {
    const char* path = std::getenv("MOESERVE_FUZZ_TOKENIZER");
    return Tokenizer::FromFile(path ? path : MOESERVE_FUZZ_DEFAULT_TOKENIZER);
  }();
  return tok;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = Get();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids = tok.Encode(text, true);
  std::string decoded = tok.Decode(ids, false);
  if (moeserve::tokenizer::IsValidUtf8(text) && decoded != text) __builtin_trap();
  StreamingDetokenizer stream(tok, true);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Push(id);
  streamed += stream.Flush();
  if (streamed != tok.Decode(ids, true)) __builtin_trap();
  // The same bytes read as ids (including out-of-range and special ones).
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 3 < size; i += 4) {
    uint32_t v = uint32_t(data[i]) | uint32_t(data[i + 1]) << 8 | uint32_t(data[i + 2]) << 16 |
                 uint32_t(data[i + 3] & 0x03) << 24;
    raw.push_back(int32_t(v % (tok.VocabSize() + 16)));
  }
  StreamingDetokenizer raw_stream(tok, false);
  std::string raw_streamed;
  for (int32_t id : raw) raw_streamed += raw_stream.Push(id);
  raw_streamed += raw_stream.Flush();
  if (raw_streamed != tok.Decode(raw, false)) __builtin_trap();
  return 0;
}
