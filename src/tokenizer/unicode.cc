#include "tokenizer/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <mutex>

#include "core/check.h"

namespace moeserve::tokenizer {

char32_t NextCodePoint(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  uint8_t b = p[0];
  if (b < 0x80) {
    pos += 1;
    return b;
  }
  if (b < 0xE0) {
    pos += 2;
    return (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b < 0xF0) {
    pos += 3;
    return (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  pos += 4;
  return (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

int ClassifyUtf8(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  uint8_t b = p[pos];
  if (b < 0x80) return 1;
  size_t need;
  // Allowed range of the second byte (Unicode table 3-7: no overlongs, surrogates, > U+10FFFF).
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (size_t k = 1; k < need; ++k) {
    if (pos + k >= n) return 0;  // valid so far, truncated by the end of the buffer
    uint8_t c = p[pos + k];
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return -int(k);
  }
  return int(need);
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    int c = ClassifyUtf8(bytes, pos);
    if (c > 0) {
      out.append(bytes.substr(pos, size_t(c)));
      pos += size_t(c);
    } else {
      out.append("\xEF\xBF\xBD");
      pos += c == 0 ? bytes.size() - pos : size_t(-c);
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (uint8_t(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    int c = ClassifyUtf8(s, pos);
    if (c <= 0) return false;
    pos += size_t(c);
  }
  return true;
}

bool IsWhitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return u_hasBinaryProperty(UChar32(cp), UCHAR_WHITE_SPACE);
}

bool IsNumeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  int8_t t = u_charType(UChar32(cp));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool IsWordChar(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  if (u_hasBinaryProperty(UChar32(cp), UCHAR_ALPHABETIC)) return true;
  if (u_hasBinaryProperty(UChar32(cp), UCHAR_JOIN_CONTROL)) return true;
  int8_t t = u_charType(UChar32(cp));
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

void AppendLowercase(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  // Full (possibly multi-char) mapping of a lone character; a one-character string gives no
  // context, which is what Rust's per-char to_lowercase does (no final-sigma rule).
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, UChar32(cp));
  UChar dst[8];
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
  if (U_FAILURE(status)) {
    AppendUtf8(cp, out);
    return;
  }
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(dst, i, n, c);
    AppendUtf8(char32_t(c), out);
  }
}

std::string Normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char c : s) ascii &= uint8_t(c) < 0x80;
  if (ascii) return std::string(s);  // ASCII is invariant under every normal form
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* norm = nullptr;
  switch (form) {
    case NormalForm::kNfc:
      norm = icu::Normalizer2::getNFCInstance(status);
      break;
    case NormalForm::kNfkc:
      norm = icu::Normalizer2::getNFKCInstance(status);
      break;
    case NormalForm::kNfd:
      norm = icu::Normalizer2::getNFDInstance(status);
      break;
    case NormalForm::kNfkd:
      norm = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status)) Fail("tokenizer normalizer: ICU unavailable: ", u_errorName(status));
  icu::StringPiece piece(s.data(), int32_t(s.size()));
  if (norm->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(s);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, int32_t(s.size()));
  norm->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    Fail("tokenizer normalizer: ICU normalization failed: ", u_errorName(status));
  return out;
}

const ByteLevelAlphabet& GetByteLevelAlphabet() {
  static const ByteLevelAlphabet alphabet = [] {
    ByteLevelAlphabet a;
    for (auto& v : a.char_to_byte) v = -1;
    // Printable bytes keep their code point; the rest are shifted to 256, 257, ... in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      a.byte_to_char[b] = printable ? char32_t(b) : next++;
      a.byte_to_utf8[b].clear();
      AppendUtf8(a.byte_to_char[b], a.byte_to_utf8[b]);
      a.char_to_byte[a.byte_to_char[b]] = int16_t(b);
    }
    return a;
  }();
  return alphabet;
}

}  // namespace moeserve::tokenizer
