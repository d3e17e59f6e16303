// Jinja tokenizer with the whitespace rules of HF's apply_chat_template (trim_blocks and
// lstrip_blocks on, one trailing newline of the template dropped), matching @huggingface/jinja.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moeserve::chat::jinja {

enum class TokenType {
  kText,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a sign with no number after it
  kComment,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// Throws TemplateError (with the line) on malformed input.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace moeserve::chat::jinja
