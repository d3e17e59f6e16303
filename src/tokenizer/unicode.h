// UTF-8 and Unicode helpers shared by the tokenizer components. Character classes follow Rust's
// definitions (char::is_whitespace, is_numeric, regex \w) because the reference implementation,
// Hugging Face `tokenizers`, is written in Rust and we must match it byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moeserve::tokenizer {

// Decodes the code point at `s[pos]` of valid UTF-8 and advances `pos`.
char32_t NextCodePoint(std::string_view s, size_t& pos);
// Appends the UTF-8 encoding of `cp` to `out`.
void AppendUtf8(char32_t cp, std::string& out);
// Byte length of the UTF-8 sequence starting with lead byte `b` (1 for invalid leads).
inline size_t Utf8Length(uint8_t b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// Classifies the bytes at `s[pos]` the way Rust's String::from_utf8_lossy does:
// returns the length (1..4) of a complete valid character, or 0 when the bytes there are a valid
// but truncated prefix (only possible at the end of `s`), or -(n) for an invalid sequence whose
// maximal valid prefix is n bytes (each such run becomes one U+FFFD).
int ClassifyUtf8(std::string_view s, size_t pos);

// Rust's String::from_utf8_lossy: invalid sequences become U+FFFD (one per maximal invalid prefix).
std::string Utf8Lossy(std::string_view bytes);
// True when `s` is valid UTF-8.
bool IsValidUtf8(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space).
bool IsWhitespace(char32_t cp);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool IsNumeric(char32_t cp);
// Rust regex `\w` (Alphabetic, M, Nd, Pc, Join_Control).
bool IsWordChar(char32_t cp);
// Appends the full lowercase mapping of `cp` (Rust char::to_lowercase, no context rules).
void AppendLowercase(char32_t cp, std::string& out);

// NFC / NFKC / NFD / NFKD of valid UTF-8 via ICU.
enum class NormalForm { kNfc, kNfkc, kNfd, kNfkd };
std::string Normalize(std::string_view s, NormalForm form);

// The GPT-2 byte-level alphabet: every byte maps to one printable code point.
struct ByteLevelAlphabet {
  char32_t byte_to_char[256];
  std::string byte_to_utf8[256];  // UTF-8 of byte_to_char, 1 or 2 bytes
  // Reverse: code point -> byte, -1 when the code point is not in the alphabet (all chars < 324).
  int16_t char_to_byte[324];
};
const ByteLevelAlphabet& GetByteLevelAlphabet();

}  // namespace moeserve::tokenizer
