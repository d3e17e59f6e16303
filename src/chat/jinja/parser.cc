// Recursive-descent parser with @huggingface/jinja's grammar and operator precedence (lowest
// first): `x if c else y`, or, and, not, comparisons and (not) in, + - ~, * / // %, **, is, |,
// unary sign, call / member / primary.
#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include "chat/jinja/ast.h"
#include "chat/jinja/error.h"
#include "chat/jinja/lexer.h"

namespace moeserve::chat::jinja {
namespace {

// Nesting bound so a hostile template cannot overflow the stack of the parser (or, later, the
// interpreter, which recurses along the same tree).
constexpr int kMaxNesting = 200;
constexpr int kMaxExprDepth = 256;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::unique_ptr<Program> Run() {
    auto program = std::make_unique<Program>();
    while (pos_ < t_.size()) AppendAny(program->body);
    return program;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxNesting) p->Fail("template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  int Line() const {
    if (t_.empty()) return 1;
    return t_[std::min(pos_, t_.size() - 1)].line;
  }
  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) {
    throw TemplateError(moeserve::detail::Concat(args...), Line());
  }
  const Token& Peek(size_t k = 0) {
    if (pos_ + k >= t_.size()) Fail("unexpected end of template");
    return t_[pos_ + k];
  }
  bool Is(TokenType type, size_t k = 0) const {
    return pos_ + k < t_.size() && t_[pos_ + k].type == type;
  }
  bool IsIdent(std::string_view name, size_t k = 0) const {
    return Is(TokenType::kIdentifier, k) && t_[pos_ + k].value == name;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!Is(TokenType::kOpenStatement) || !Is(TokenType::kIdentifier, 1)) return false;
    for (auto n : names) {
      if (t_[pos_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& Expect(TokenType type, const char* what) {
    const Token& tok = Peek();
    if (tok.type != type) Fail("expected ", what, ", got '", tok.value, "'");
    ++pos_;
    return tok;
  }
  void ExpectIdent(const char* name) {
    if (!IsIdent(name)) Fail("expected '", name, "'");
    ++pos_;
  }
  void ExpectEnd(const char* name) {
    Expect(TokenType::kOpenStatement, "{%");
    ExpectIdent(name);
    Expect(TokenType::kCloseStatement, "%}");
  }
  // Parses statements until one of `names` opens; fails cleanly at the end of the template.
  void ParseUntil(Body& body, std::initializer_list<std::string_view> names, const char* what) {
    while (!IsStatement(names)) {
      if (pos_ >= t_.size()) Fail("unexpected end of template, expected {% ", what, " %}");
      AppendAny(body);
    }
  }

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Records the subtree height and bounds it: left-nested chains (`a+a+a...`, `x|f|f|f...`) are
  // built by loops, not recursion, so the nesting guard alone would not bound them.
  ExprPtr Seal(ExprPtr e) {
    int d = 0;
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get()}) {
      if (c) d = std::max(d, c->depth);
    }
    for (const auto& i : e->items) {
      if (i) d = std::max(d, i->depth);
    }
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) Fail("expression nested too deeply");
    return e;
  }

  void AppendAny(Body& body) {
    DepthGuard guard(this);
    const Token& tok = Peek();
    switch (tok.type) {
      case TokenType::kComment:
        ++pos_;
        return;
      case TokenType::kText: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = tok.value;
        ++pos_;
        body.push_back(std::move(s));
        return;
      }
      case TokenType::kOpenStatement:
        body.push_back(ParseStatement());
        return;
      case TokenType::kOpenExpression: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        ++pos_;
        s->expr = ParseExpression();
        Expect(TokenType::kCloseExpression, "}}");
        body.push_back(std::move(s));
        return;
      }
      default:
        Fail("unexpected '", tok.value, "'");
    }
  }

  StmtPtr ParseStatement() {
    Expect(TokenType::kOpenStatement, "{%");
    const Token& kw = Peek();
    if (kw.type != TokenType::kIdentifier) Fail("unknown statement '", kw.value, "'");
    auto s = std::make_unique<Stmt>();
    s->line = kw.line;
    std::string name = kw.value;
    ++pos_;
    if (name == "set") {
      s->kind = Stmt::Kind::kSet;
      s->target = ParseExpressionSequence(false);
      if (Is(TokenType::kEquals)) {
        ++pos_;
        s->expr = ParseExpressionSequence(false);
      } else {
        Expect(TokenType::kCloseStatement, "%}");
        ParseUntil(s->body, {"endset"}, "endset");
        Expect(TokenType::kOpenStatement, "{%");
        ExpectIdent("endset");
      }
      Expect(TokenType::kCloseStatement, "%}");
    } else if (name == "if") {
      s = ParseIf(s->line);
      ExpectEnd("endif");
    } else if (name == "for") {
      s->kind = Stmt::Kind::kFor;
      s->target = ParseExpressionSequence(true);
      if (s->target->kind != Expr::Kind::kIdent && s->target->kind != Expr::Kind::kTuple) {
        Fail("expected identifier/tuple for the loop variable");
      }
      ExpectIdent("in");
      s->expr = ParseExpression();
      Expect(TokenType::kCloseStatement, "%}");
      ParseUntil(s->body, {"endfor", "else"}, "endfor");
      if (IsStatement({"else"})) {
        pos_ += 2;
        Expect(TokenType::kCloseStatement, "%}");
        ParseUntil(s->alternate, {"endfor"}, "endfor");
      }
      ExpectEnd("endfor");
    } else if (name == "macro") {
      s->kind = Stmt::Kind::kMacro;
      const Token& id = Peek();
      if (id.type != TokenType::kIdentifier) Fail("expected identifier following macro statement");
      s->name = id.value;
      ++pos_;
      s->params = ParseArgs(true);
      Expect(TokenType::kCloseStatement, "%}");
      ParseUntil(s->body, {"endmacro"}, "endmacro");
      ExpectEnd("endmacro");
      FindSpecialNames(*s);
    } else if (name == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (Is(TokenType::kOpenParen)) s->params = ParseArgs(true);
      const Token& id = Peek();
      if (id.type != TokenType::kIdentifier) Fail("expected identifier following call statement");
      auto callee = Make(Expr::Kind::kIdent, id.line);
      callee->name = id.value;
      ++pos_;
      auto call = Make(Expr::Kind::kCall, id.line);
      call->a = std::move(callee);
      call->items = ParseArgs(false);
      s->expr = std::move(call);
      Expect(TokenType::kCloseStatement, "%}");
      ParseUntil(s->body, {"endcall"}, "endcall");
      ExpectEnd("endcall");
      FindSpecialNames(*s);
    } else if (name == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->filter = ParseFilterSpec(nullptr);
      Expect(TokenType::kCloseStatement, "%}");
      ParseUntil(s->body, {"endfilter"}, "endfilter");
      ExpectEnd("endfilter");
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      Expect(TokenType::kCloseStatement, "%}");
    } else {
      Fail("unknown statement type: ", name);
    }
    return s;
  }

  StmtPtr ParseIf(int line) {
    DepthGuard guard(this);
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kIf;
    s->line = line;
    s->expr = ParseExpression();
    Expect(TokenType::kCloseStatement, "%}");
    ParseUntil(s->body, {"elif", "else", "endif"}, "endif");
    if (IsStatement({"elif"})) {
      int elif_line = t_[pos_ + 1].line;
      pos_ += 2;
      s->alternate.push_back(ParseIf(elif_line));
    } else if (IsStatement({"else"})) {
      pos_ += 2;
      Expect(TokenType::kCloseStatement, "%}");
      ParseUntil(s->alternate, {"endif"}, "endif");
    }
    return s;
  }

  // Which of caller / kwargs / varargs a macro body refers to (they are bound only then).
  void FindSpecialNames(Stmt& s) {
    std::set<std::string> names;
    std::function<void(const Expr*)> visit_expr = [&](const Expr* e) {
      if (!e) return;
      if (e->kind == Expr::Kind::kIdent) names.insert(e->name);
      visit_expr(e->a.get());
      visit_expr(e->b.get());
      visit_expr(e->c.get());
      for (const auto& i : e->items) visit_expr(i.get());
    };
    std::function<void(const Body&)> visit_body = [&](const Body& body) {
      for (const auto& st : body) {
        visit_expr(st->expr.get());
        visit_expr(st->target.get());
        visit_expr(st->filter.get());
        for (const auto& p : st->params) {
          if (p->kind == Expr::Kind::kKwarg) visit_expr(p->a.get());
        }
        visit_body(st->body);
        visit_body(st->alternate);
      }
    };
    visit_body(s.body);
    for (const auto& p : s.params) {
      if (p->kind == Expr::Kind::kKwarg) visit_expr(p->a.get());
    }
    s.uses_caller = names.count("caller") > 0;
    s.uses_kwargs = names.count("kwargs") > 0;
    s.uses_varargs = names.count("varargs") > 0;
  }

  ExprPtr ParseExpressionSequence(bool primary) {
    int line = Line();
    ExprPtr first = primary ? ParsePrimary() : ParseExpression();
    if (!Is(TokenType::kComma)) return first;
    auto tuple = Make(Expr::Kind::kTuple, line);
    tuple->items.push_back(std::move(first));
    while (Is(TokenType::kComma)) {
      ++pos_;
      tuple->items.push_back(primary ? ParsePrimary() : ParseExpression());
    }
    return Seal(std::move(tuple));
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(this);
    int line = Line();
    ExprPtr a = ParseOr();
    if (!IsIdent("if")) return a;
    ++pos_;
    ExprPtr test = ParseOr();
    if (IsIdent("else")) {
      ++pos_;
      auto t = Make(Expr::Kind::kTernary, line);
      t->a = std::move(test);
      t->b = std::move(a);
      t->c = ParseExpression();
      return Seal(std::move(t));
    }
    auto sel = Make(Expr::Kind::kSelect, line);
    sel->a = std::move(a);
    sel->b = std::move(test);
    return Seal(std::move(sel));
  }

  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto e = Make(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return Seal(std::move(e));
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsIdent("or")) {
      int line = Line();
      ++pos_;
      left = Binary("or", std::move(left), ParseAnd(), line);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsIdent("and")) {
      int line = Line();
      ++pos_;
      left = Binary("and", std::move(left), ParseNot(), line);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsIdent("not")) {
      DepthGuard guard(this);
      auto e = Make(Expr::Kind::kUnary, Line());
      e->name = "not";
      ++pos_;
      e->a = ParseNot();
      return Seal(std::move(e));
    }
    return ParseComparison();
  }

  ExprPtr ParseComparison() {
    ExprPtr left = ParseAdditive();
    while (true) {
      int line = Line();
      std::string op;
      if (IsIdent("not") && IsIdent("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else if (IsIdent("in")) {
        op = "in";
        ++pos_;
      } else if (Is(TokenType::kComparison)) {
        op = t_[pos_++].value;
      } else {
        return left;
      }
      left = Binary(op, std::move(left), ParseAdditive(), line);
    }
  }

  ExprPtr ParseAdditive() {
    ExprPtr left = ParseMultiplicative();
    while (Is(TokenType::kAdditive)) {
      int line = Line();
      std::string op = t_[pos_++].value;
      left = Binary(op, std::move(left), ParseMultiplicative(), line);
    }
    return left;
  }

  ExprPtr ParseMultiplicative() {
    ExprPtr left = ParsePower();
    while (Is(TokenType::kMultiplicative)) {
      int line = Line();
      std::string op = t_[pos_++].value;
      left = Binary(op, std::move(left), ParsePower(), line);
    }
    return left;
  }

  ExprPtr ParsePower() {
    ExprPtr left = ParseTest();
    while (Is(TokenType::kPower)) {
      int line = Line();
      ++pos_;
      left = Binary("**", std::move(left), ParseTest(), line);
    }
    return left;
  }

  ExprPtr ParseTest() {
    ExprPtr operand = ParseFilter();
    while (IsIdent("is")) {
      auto e = Make(Expr::Kind::kTest, Line());
      ++pos_;
      if (IsIdent("not")) {
        e->negate = true;
        ++pos_;
      }
      const Token& name = Peek();
      if (name.type != TokenType::kIdentifier) Fail("expected identifier for the test");
      e->name = name.value;
      ++pos_;
      if (Is(TokenType::kOpenParen)) {
        e->items = ParseArgs(false);
      } else if (Is(TokenType::kNumber) || Is(TokenType::kString) || Is(TokenType::kOpenBracket) ||
                 Is(TokenType::kOpenBrace) ||
                 (Is(TokenType::kIdentifier) && !IsIdent("else") && !IsIdent("or") &&
                  !IsIdent("and") && !IsIdent("if") && !IsIdent("in") && !IsIdent("not") &&
                  !IsIdent("is"))) {
        // Python Jinja's `x is divisibleby 3` form.
        e->items.push_back(ParsePrimary());
      }
      e->a = std::move(operand);
      operand = Seal(std::move(e));
    }
    return operand;
  }

  ExprPtr ParseFilterSpec(ExprPtr operand) {
    const Token& name = Peek();
    if (name.type != TokenType::kIdentifier) Fail("expected identifier for the filter");
    auto f = Make(Expr::Kind::kFilter, name.line);
    f->name = name.value;
    ++pos_;
    if (Is(TokenType::kOpenParen)) {
      f->has_args = true;
      f->items = ParseArgs(false);
    }
    f->a = std::move(operand);
    return Seal(std::move(f));
  }

  ExprPtr ParseFilter() {
    ExprPtr operand = ParseUnarySign();
    while (Is(TokenType::kPipe)) {
      ++pos_;
      operand = ParseFilterSpec(std::move(operand));
    }
    return operand;
  }

  ExprPtr ParseUnarySign() {
    if ((Is(TokenType::kUnary) || Is(TokenType::kAdditive)) &&
        (t_[pos_].value == "-" || t_[pos_].value == "+")) {
      DepthGuard guard(this);
      auto e = Make(Expr::Kind::kUnary, Line());
      e->name = t_[pos_++].value;
      e->a = ParseUnarySign();
      return Seal(std::move(e));
    }
    return ParseCallMember();
  }

  ExprPtr ParseCallMember() {
    ExprPtr e = ParseMember(ParsePrimary());
    while (Is(TokenType::kOpenParen)) {
      auto call = Make(Expr::Kind::kCall, Line());
      call->a = std::move(e);
      call->items = ParseArgs(false);
      e = ParseMember(Seal(std::move(call)));
    }
    return e;
  }

  std::vector<ExprPtr> ParseArgs(bool parameters) {
    Expect(TokenType::kOpenParen, "(");
    std::vector<ExprPtr> args;
    bool saw_keyword = false, saw_spread = false;
    while (!Is(TokenType::kCloseParen)) {
      if (pos_ >= t_.size()) Fail("unexpected end of template in argument list");
      int line = Line();
      bool kw_spread = Is(TokenType::kPower);
      bool spread = Is(TokenType::kMultiplicative) && t_[pos_].value == "*";
      if (parameters && (kw_spread || spread)) {
        Fail("argument unpacking is not allowed in parameter declarations");
      }
      if (kw_spread) {
        ++pos_;
        auto e = Make(Expr::Kind::kKwSpread, line);
        e->a = ParseExpression();
        args.push_back(Seal(std::move(e)));
        if (Is(TokenType::kComma)) ++pos_;
        if (!Is(TokenType::kCloseParen)) Fail("`**` must be applied to the final argument");
        break;
      }
      ExprPtr arg;
      if (spread) {
        if (saw_spread) Fail("only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++pos_;
        arg = Make(Expr::Kind::kSpread, line);
        arg->a = ParseExpression();
        arg = Seal(std::move(arg));
      } else {
        arg = ParseExpression();
        if (Is(TokenType::kEquals)) {
          ++pos_;
          if (arg->kind != Expr::Kind::kIdent) Fail("expected identifier for keyword argument");
          auto kw = Make(Expr::Kind::kKwarg, line);
          kw->name = arg->name;
          kw->a = ParseExpression();
          arg = Seal(std::move(kw));
        }
        if (parameters && arg->kind != Expr::Kind::kIdent && arg->kind != Expr::Kind::kKwarg) {
          Fail("expected identifier for parameter declaration");
        }
        if (arg->kind == Expr::Kind::kKwarg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          Fail(parameters ? "non-default argument follows default argument"
                          : "positional arguments must come before keyword arguments");
        } else if (saw_spread) {
          Fail("positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (Is(TokenType::kComma)) ++pos_;
    }
    Expect(TokenType::kCloseParen, ")");
    if (parameters) {
      std::set<std::string> seen;
      for (const auto& a : args) {
        if (!seen.insert(a->name).second) Fail("duplicate parameter name: ", a->name);
      }
    }
    return args;
  }

  ExprPtr ParseMember(ExprPtr object) {
    while (Is(TokenType::kDot) || Is(TokenType::kOpenBracket)) {
      DepthGuard guard(this);
      int line = Line();
      bool computed = Is(TokenType::kOpenBracket);
      ++pos_;
      auto m = Make(Expr::Kind::kMember, line);
      m->a = std::move(object);
      if (computed) {
        std::vector<ExprPtr> parts;
        bool is_slice = false;
        while (!Is(TokenType::kCloseBracket)) {
          if (pos_ >= t_.size()) Fail("unexpected end of template in subscript");
          if (Is(TokenType::kColon)) {
            parts.push_back(nullptr);
            ++pos_;
            is_slice = true;
          } else {
            parts.push_back(ParseExpression());
            if (Is(TokenType::kColon)) {
              ++pos_;
              is_slice = true;
            }
          }
        }
        if (parts.empty()) Fail("expected at least one argument for member/slice expression");
        if (is_slice) {
          if (parts.size() > 3) Fail("expected 0-3 arguments for slice expression");
          auto sl = Make(Expr::Kind::kSlice, line);
          parts.resize(3);
          sl->a = std::move(parts[0]);
          sl->b = std::move(parts[1]);
          sl->c = std::move(parts[2]);
          m->b = Seal(std::move(sl));
        } else {
          m->b = std::move(parts[0]);
        }
        Expect(TokenType::kCloseBracket, "]");
      } else {
        ExprPtr prop = ParsePrimary();
        if (prop->kind == Expr::Kind::kIdent) {
          auto lit = Make(Expr::Kind::kLiteral, line);
          lit->literal = Value::Str(prop->name);
          prop = std::move(lit);
        } else if (!(prop->kind == Expr::Kind::kLiteral && prop->literal.is_int())) {
          Fail("expected identifier or integer following dot operator");
        }
        m->b = std::move(prop);
      }
      object = Seal(std::move(m));
    }
    return object;
  }

  ExprPtr ParsePrimary() {
    DepthGuard guard(this);
    const Token& tok = Peek();
    int line = tok.line;
    ++pos_;
    switch (tok.type) {
      case TokenType::kNumber: {
        auto e = Make(Expr::Kind::kLiteral, line);
        const std::string& v = tok.value;
        if (v.find('.') != std::string::npos) {
          e->literal = Value::Float(std::strtod(v.c_str(), nullptr));
        } else {
          int64_t i = 0;
          auto res = std::from_chars(v.data() + (v[0] == '+'), v.data() + v.size(), i);
          if (res.ec == std::errc() && res.ptr == v.data() + v.size()) {
            e->literal = Value::Int(i);
          } else {
            e->literal = Value::Float(std::strtod(v.c_str(), nullptr));
          }
        }
        return e;
      }
      case TokenType::kString: {
        auto e = Make(Expr::Kind::kLiteral, line);
        std::string s = tok.value;
        while (Is(TokenType::kString)) s += t_[pos_++].value;
        e->literal = Value::Str(std::move(s));
        return e;
      }
      case TokenType::kIdentifier: {
        auto e = Make(Expr::Kind::kIdent, line);
        e->name = tok.value;
        return e;
      }
      case TokenType::kOpenParen: {
        ExprPtr e = ParseExpressionSequence(false);
        Expect(TokenType::kCloseParen, ")");
        return e;
      }
      case TokenType::kOpenBracket: {
        auto e = Make(Expr::Kind::kArray, line);
        while (!Is(TokenType::kCloseBracket)) {
          if (pos_ >= t_.size()) Fail("unexpected end of template in list literal");
          e->items.push_back(ParseExpression());
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return Seal(std::move(e));
      }
      case TokenType::kOpenBrace: {
        auto e = Make(Expr::Kind::kObject, line);
        while (!Is(TokenType::kCloseBrace)) {
          if (pos_ >= t_.size()) Fail("unexpected end of template in dict literal");
          e->items.push_back(ParseExpression());
          Expect(TokenType::kColon, "':' between key and value");
          e->items.push_back(ParseExpression());
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return Seal(std::move(e));
      }
      default:
        --pos_;
        Fail("unexpected token '", tok.value, "'");
    }
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<Program> ParseTemplate(std::string_view source) {
  return Parser(Tokenize(source)).Run();
}

}  // namespace moeserve::chat::jinja
