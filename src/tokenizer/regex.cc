#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/check.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

// Per-thread matching state shared by every Regex: only one match runs at a time on a thread.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Deep look-ahead/backtracking on long inputs needs more than the 32 KiB default stack.
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& MatchState() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string Regex::Translate(const std::string& p) {
  std::string out;
  out.reserve(p.size());
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      if (e == 'h') {
        out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
      } else if (e == 'H' && !in_class) {
        out += "[^0-9a-fA-F]";
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& what) {
  std::string translated = Translate(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset,
                             nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    Fail(what, ": regex '", pattern, "' does not compile at offset ", error_offset, ": ",
         reinterpret_cast<const char*>(message));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool Regex::Find(std::string_view text, size_t start, size_t& match_begin,
                 size_t& match_end) const {
  ThreadMatchState& st = MatchState();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, st.data, st.context)
                : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, st.data,
                              st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    Fail("tokenizer regex: match failed: ", reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  match_begin = ov[0];
  match_end = ov[1];
  return true;
}

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  size_t pos = 0;
  size_t b, e;
  while (pos <= text.size() && Find(text, pos, b, e)) {
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (b >= text.size()) break;
      pos = b + Utf8Length(uint8_t(text[b]));
    }
  }
}

std::string RegexEscape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace moeserve::tokenizer
