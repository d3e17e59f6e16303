// Code point ranges to UTF-8 byte-range sequences. A range of code points whose encodings share
// a length and whose low 6k bits span their full [0, 2^6k) interval maps to one sequence of byte
// ranges; any other range is split at the boundary where that fails, recursively.
#include "grammar/grammar.h"

namespace moeserve::grammar {
namespace {

using Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

int EncodedLength(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

std::string Encode(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, s);
  return s;
}

// lo and hi have the same encoded length.
void SplitSameLength(uint32_t lo, uint32_t hi, std::vector<Sequence>& out) {
  const int len = EncodedLength(lo);
  for (int i = 1; i < len; ++i) {
    const uint32_t low_mask = (1u << (6 * i)) - 1;  // the bits of the last i bytes
    if ((lo & ~low_mask) != (hi & ~low_mask)) {
      if ((lo & low_mask) != 0) {
        SplitSameLength(lo, lo | low_mask, out);
        SplitSameLength((lo | low_mask) + 1, hi, out);
        return;
      }
      if ((hi & low_mask) != low_mask) {
        SplitSameLength(lo, (hi & ~low_mask) - 1, out);
        SplitSameLength(hi & ~low_mask, hi, out);
        return;
      }
    }
  }
  // Every trailing group of bytes spans its full range: the product of per-byte ranges.
  const std::string a = Encode(lo), b = Encode(hi);
  Sequence seq;
  for (size_t i = 0; i < a.size(); ++i)
    seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Sequence> Utf8RangeSequences(uint32_t lo, uint32_t hi) {
  std::vector<Sequence> out;
  if (hi > kMaxCodepoint) hi = kMaxCodepoint;
  // Surrogates have no UTF-8 encoding.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) out = Utf8RangeSequences(lo, 0xD7FF);
    if (hi > 0xDFFF)
      for (Sequence& s : Utf8RangeSequences(0xE000, hi)) out.push_back(std::move(s));
    return out;
  }
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      out = Utf8RangeSequences(lo, boundary);
      for (Sequence& s : Utf8RangeSequences(boundary + 1, hi)) out.push_back(std::move(s));
      return out;
    }
  }
  if (lo <= hi) SplitSameLength(lo, hi, out);
  return out;
}

}  // namespace moeserve::grammar
