// Tree-walking interpreter. One Interpreter per Render call: it owns the per-render limits (loop
// iterations, work, recursion depth, output size) that keep a hostile template from hanging or
// exhausting memory, so the parsed Program can be shared by concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace moeserve::chat::jinja {

struct Limits {
  int64_t max_loop_iterations = 1'000'000;  // all loops of one render together
  int64_t max_work = 200'000'000;           // node evaluations + elements/bytes built (/64)
  int max_eval_depth = 1500;                // nested evaluations (stack bound)
  int max_macro_depth = 100;
  size_t max_string_bytes = 64u << 20;  // any string built, the output included
  size_t max_array_items = 1'000'000;
};

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent) : parent(std::move(parent)) {}
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
  Value Lookup(const std::string& name) const;
  void Set(const std::string& name, Value v) { vars[name] = std::move(v); }
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits) : limits_(limits) {}

  std::string Run(const Program& program, const Value& context);

  // Accounting hooks for builtins.
  void ChargeWork(int64_t units);
  void CheckString(size_t bytes) const;
  void CheckArray(size_t items) const;

  Value ApplyFilter(const std::string& name, const Value& operand, const CallArgs* args);
  bool ApplyTest(const std::string& name, const Value& operand, const CallArgs& args);
  Value CallFunction(const Value& fn, const CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow RenderBody(const Body& body, const ScopePtr& scope, std::string& out);
  Flow RenderStmt(const Stmt& st, const ScopePtr& scope, std::string& out);
  void RenderFor(const Stmt& st, const ScopePtr& scope, std::string& out);
  void ExecSet(const Stmt& st, const ScopePtr& scope);
  void DefineMacro(const Stmt& st, const ScopePtr& scope);
  Value CallMacro(const Stmt& st, const std::weak_ptr<Scope>& def_scope, const CallArgs& args);
  void BindParams(const Stmt& st, const CallArgs& args, const ScopePtr& scope, const char* what);
  void RenderCallBlock(const Stmt& st, const ScopePtr& scope, std::string& out);

  Value Eval(const Expr& e, const ScopePtr& scope);
  Value EvalBinary(const Expr& e, const ScopePtr& scope);
  Value EvalMember(const Expr& e, const ScopePtr& scope);
  Value EvalFilter(const Expr& e, const Value& operand, const ScopePtr& scope);
  CallArgs EvalArgs(const std::vector<ExprPtr>& args, const ScopePtr& scope);
  void Append(std::string& out, std::string_view s) const;

  Limits limits_;
  int64_t iterations_ = 0;
  int64_t work_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
  int loop_depth_ = 0;
};

// Builtins (builtins.cc).
void InstallGlobals(Scope& global);
// Methods and properties reached with `.name` on strings, lists and mappings; undefined if none.
Value GetBuiltinMember(Interpreter& in, const Value& object, const std::string& name);

}  // namespace moeserve::chat::jinja
