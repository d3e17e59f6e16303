#include "chat/jinja/interpreter.h"

#include <cmath>

#include "chat/jinja/error.h"

namespace moeserve::chat::jinja {

Value Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value();
}

namespace {

struct DepthGuard {
  DepthGuard(int& depth, int max) : depth(depth) {
    if (++depth > max) {
      --depth;
      Throw("template recursion too deep");
    }
  }
  ~DepthGuard() { --depth; }
  int& depth;
};

// JS Array.prototype.slice-like semantics of HF's slice(), with Python's negative-step support.
std::vector<size_t> SliceIndices(int64_t len, const Value& start_v, const Value& stop_v,
                                 const Value& step_v) {
  int64_t step = step_v.is_undefined() ? 1 : step_v.as_int();
  if (step == 0) Throw("slice step cannot be zero");
  int64_t start, stop;
  if (step > 0) {
    start = start_v.is_undefined() ? 0 : start_v.as_int();
    stop = stop_v.is_undefined() ? len : stop_v.as_int();
    start = start < 0 ? std::max<int64_t>(len + start, 0) : std::min(start, len);
    stop = stop < 0 ? std::max<int64_t>(len + stop, 0) : std::min(stop, len);
  } else {
    start = start_v.is_undefined() ? len - 1 : start_v.as_int();
    stop = stop_v.is_undefined() ? -1 : stop_v.as_int();
    start = start < 0 ? std::max<int64_t>(len + start, -1) : std::min(start, len - 1);
    stop = stop < -1 ? std::max<int64_t>(len + stop, -1) : std::min(stop, len - 1);
  }
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(static_cast<size_t>(i));
  }
  return out;
}

bool IsNumeric(const Value& v) {
  return v.is_int() || v.is_float();
}

}  // namespace

void Interpreter::ChargeWork(int64_t units) {
  work_ += units;
  if (work_ > limits_.max_work) Throw("template exceeded its work budget");
}

void Interpreter::CheckString(size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    Throw("string exceeds ", limits_.max_string_bytes, " bytes");
}

void Interpreter::CheckArray(size_t items) const {
  if (items > limits_.max_array_items) Throw("list exceeds ", limits_.max_array_items, " items");
}

void Interpreter::Append(std::string& out, std::string_view s) const {
  CheckString(out.size() + s.size());
  out += s;
}

std::string Interpreter::Run(const Program& program, const Value& context) {
  auto global = std::make_shared<Scope>(nullptr);
  InstallGlobals(*global);
  if (context.is_object()) {
    for (const auto& [k, v] : context.object().entries()) global->Set(k, v);
  }
  std::string out;
  Flow flow = RenderBody(program.body, global, out);
  if (flow != Flow::kNormal) Throw("break/continue outside of a loop");
  return out;
}

Interpreter::Flow Interpreter::RenderBody(const Body& body, const ScopePtr& scope,
                                          std::string& out) {
  for (const auto& st : body) {
    Flow f;
    try {
      f = RenderStmt(*st, scope, out);
    } catch (const TemplateError& e) {
      if (e.line() == 0) throw TemplateError(e.message(), st->line);
      throw;
    }
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::RenderStmt(const Stmt& st, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(depth_, limits_.max_eval_depth);
  ChargeWork(1);
  switch (st.kind) {
    case Stmt::Kind::kText:
      Append(out, st.text);
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      Value v = Eval(*st.expr, scope);
      if (!v.is_none() && !v.is_undefined()) Append(out, ToDisplayString(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      return RenderBody(Truthy(Eval(*st.expr, scope)) ? st.body : st.alternate, scope, out);
    case Stmt::Kind::kFor:
      RenderFor(st, scope, out);
      return Flow::kNormal;
    case Stmt::Kind::kSet:
      ExecSet(st, scope);
      return Flow::kNormal;
    case Stmt::Kind::kMacro:
      DefineMacro(st, scope);
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock:
      RenderCallBlock(st, scope, out);
      return Flow::kNormal;
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      if (RenderBody(st.body, scope, body) != Flow::kNormal) {
        Throw("break/continue inside a filter block");
      }
      CallArgs args = EvalArgs(st.filter->items, scope);
      Value v = ApplyFilter(st.filter->name, Value::Str(std::move(body)),
                            st.filter->has_args ? &args : nullptr);
      if (!v.is_none() && !v.is_undefined()) Append(out, ToDisplayString(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      if (loop_depth_ == 0) Throw("break outside of a loop");
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      if (loop_depth_ == 0) Throw("continue outside of a loop");
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

namespace {

void BindLoopTarget(const Expr& target, const Value& item, Scope& scope) {
  if (target.kind == Expr::Kind::kIdent) {
    scope.Set(target.name, item);
    return;
  }
  if (!item.is_array()) Throw("Cannot unpack non-iterable type: ", item.TypeName());
  const auto& values = item.array().items;
  if (values.size() != target.items.size()) {
    Throw("Too ", target.items.size() > values.size() ? "few" : "many", " items to unpack");
  }
  for (size_t j = 0; j < target.items.size(); ++j) {
    if (target.items[j]->kind != Expr::Kind::kIdent) Throw("Cannot unpack to a non-identifier");
    scope.Set(target.items[j]->name, values[j]);
  }
}

}  // namespace

void Interpreter::RenderFor(const Stmt& st, const ScopePtr& scope, std::string& out) {
  // One scope for the whole loop (HF): assignments inside the body persist across iterations
  // but not after the loop.
  auto loop_scope = std::make_shared<Scope>(scope);
  const Expr* test = nullptr;
  Value iterable;
  if (st.expr->kind == Expr::Kind::kSelect) {
    iterable = Eval(*st.expr->a, loop_scope);
    test = st.expr->b.get();
  } else {
    iterable = Eval(*st.expr, loop_scope);
  }
  std::vector<Value> candidates;
  if (iterable.is_array()) {
    candidates = iterable.array().items;
  } else if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.object().entries()) candidates.push_back(Value::Str(k));
  } else if (iterable.is_string()) {
    for (char32_t cp : DecodeUtf8(iterable.str())) {
      std::string ch;
      AppendUtf8(ch, cp);
      candidates.push_back(Value::Str(std::move(ch)));
    }
  } else {
    Throw("Expected iterable or object type in for loop: got ", iterable.TypeName());
  }
  std::vector<Value> items;
  for (const Value& c : candidates) {
    if (st.target->kind == Expr::Kind::kTuple) {
      if (!c.is_array()) Throw("Cannot unpack non-iterable type: ", c.TypeName());
      size_t expected = st.target->items.size(), actual = c.array().items.size();
      if (expected != actual) Throw("Too ", expected > actual ? "few" : "many", " items to unpack");
    }
    if (test) {
      if (++iterations_ > limits_.max_loop_iterations) Throw("too many loop iterations");
      auto test_scope = std::make_shared<Scope>(loop_scope);
      BindLoopTarget(*st.target, c, *test_scope);
      if (!Truthy(Eval(*test, test_scope))) continue;
    }
    items.push_back(c);
  }
  bool iterated = false;
  ++loop_depth_;
  struct LoopDepth {
    int& d;
    ~LoopDepth() { --d; }
  } loop_depth_guard{loop_depth_};
  for (size_t i = 0; i < items.size(); ++i) {
    if (++iterations_ > limits_.max_loop_iterations) Throw("too many loop iterations");
    auto loop = std::make_shared<Object>();
    int64_t n = static_cast<int64_t>(items.size()), idx = static_cast<int64_t>(i);
    loop->Set("index", Value::Int(idx + 1));
    loop->Set("index0", Value::Int(idx));
    loop->Set("revindex", Value::Int(n - idx));
    loop->Set("revindex0", Value::Int(n - idx - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(idx == n - 1));
    loop->Set("length", Value::Int(n));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value());
    loop->Set("nextitem", idx < n - 1 ? items[i + 1] : Value());
    loop->Set("cycle", Value::MakeFunction("cycle", [idx](Interpreter&, const CallArgs& a) {
                if (a.positional.empty()) Throw("no items for cycling given");
                return a.positional[idx % a.positional.size()];
              }));
    loop_scope->Set("loop", Value::MakeObject(std::move(loop)));
    BindLoopTarget(*st.target, items[i], *loop_scope);
    Flow f = RenderBody(st.body, loop_scope, out);
    if (f == Flow::kContinue) continue;  // HF: a continued iteration does not count as one
    if (f == Flow::kBreak) break;
    iterated = true;
  }
  if (!iterated) {
    --loop_depth_;
    Flow f = RenderBody(st.alternate, loop_scope, out);
    ++loop_depth_;
    if (f != Flow::kNormal) Throw("break/continue outside of a loop");
  }
}

void Interpreter::ExecSet(const Stmt& st, const ScopePtr& scope) {
  Value rhs;
  if (st.expr) {
    rhs = Eval(*st.expr, scope);
  } else {
    std::string body;
    if (RenderBody(st.body, scope, body) != Flow::kNormal) Throw("break/continue inside set");
    rhs = Value::Str(std::move(body));
  }
  const Expr& t = *st.target;
  if (t.kind == Expr::Kind::kIdent) {
    scope->Set(t.name, std::move(rhs));
  } else if (t.kind == Expr::Kind::kTuple) {
    if (!rhs.is_array()) Throw("Cannot unpack non-iterable type in set: ", rhs.TypeName());
    const auto& values = rhs.array().items;
    if (values.size() != t.items.size()) {
      Throw("Too ", t.items.size() > values.size() ? "few" : "many", " items to unpack in set");
    }
    for (size_t i = 0; i < t.items.size(); ++i) {
      if (t.items[i]->kind != Expr::Kind::kIdent) Throw("Cannot unpack to non-identifier in set");
      scope->Set(t.items[i]->name, values[i]);
    }
  } else if (t.kind == Expr::Kind::kMember) {
    Value object = Eval(*t.a, scope);
    if (!object.is_namespace()) Throw("cannot assign attribute on non-namespace object");
    if (t.b->kind != Expr::Kind::kLiteral || !t.b->literal.is_string()) {
      Throw("Cannot assign to member with non-identifier property");
    }
    object.ns().Set(t.b->literal.str(), std::move(rhs));
  } else {
    Throw("Invalid target of set");
  }
}

void Interpreter::BindParams(const Stmt& st, const CallArgs& args, const ScopePtr& scope,
                             const char* what) {
  std::vector<std::pair<std::string, Value>> kwargs = args.kwargs;
  std::vector<const Expr*> pending_defaults;
  for (size_t i = 0; i < st.params.size(); ++i) {
    const Expr& p = *st.params[i];
    const std::string& name = p.name;
    Value v;
    bool found = false;
    if (i < args.positional.size()) {
      v = args.positional[i];
      found = true;
    } else {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == name) {
          v = it->second;
          kwargs.erase(it);
          found = true;
          break;
        }
      }
    }
    if (!found && p.kind == Expr::Kind::kKwarg) pending_defaults.push_back(&p);
    scope->Set(name, std::move(v));
  }
  if (st.uses_kwargs) {
    auto obj = std::make_shared<Object>();
    for (auto& [k, v] : kwargs) obj->Set(k, v);
    scope->Set("kwargs", Value::MakeObject(std::move(obj)));
  } else if (!kwargs.empty()) {
    Throw("macro ", what, " takes no keyword argument '", kwargs[0].first, "'");
  }
  if (st.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = st.params.size(); i < args.positional.size(); ++i) {
      rest.push_back(args.positional[i]);
    }
    scope->Set("varargs", Value::MakeArray(std::move(rest)));
  } else if (args.positional.size() > st.params.size()) {
    Throw("macro ", what, " takes not more than ", st.params.size(), " argument(s)");
  }
  for (const Expr* p : pending_defaults) scope->Set(p->name, Eval(*p->a, scope));
}

void Interpreter::DefineMacro(const Stmt& st, const ScopePtr& scope) {
  // The closure holds its defining scope weakly: scopes own macro values, and a strong reference
  // back would leak the scope chain.
  std::weak_ptr<Scope> def_scope = scope;
  const Stmt* stmt = &st;
  scope->Set(st.name, Value::MakeFunction(
                          st.name, [this, stmt, def_scope](Interpreter&, const CallArgs& args) {
                            return CallMacro(*stmt, def_scope, args);
                          }));
}

Value Interpreter::CallMacro(const Stmt& st, const std::weak_ptr<Scope>& def_scope,
                             const CallArgs& args) {
  ScopePtr parent = def_scope.lock();
  if (!parent) Throw("macro '", st.name, "' called after its scope ended");
  DepthGuard guard(macro_depth_, limits_.max_macro_depth);
  if (st.uses_caller) {
    parent = std::make_shared<Scope>(parent);
    parent->Set("caller", args.caller ? *args.caller : Value());
  }
  auto scope = std::make_shared<Scope>(parent);
  BindParams(st, args, scope, ("'" + st.name + "'").c_str());
  std::string out;
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // a break inside a macro cannot reach the caller's loop
  Flow f = RenderBody(st.body, scope, out);
  loop_depth_ = saved_loop_depth;
  if (f != Flow::kNormal) Throw("break/continue outside of a loop");
  return Value::Str(std::move(out));
}

void Interpreter::RenderCallBlock(const Stmt& st, const ScopePtr& scope, std::string& out) {
  std::weak_ptr<Scope> env = scope;
  const Stmt* stmt = &st;
  Value caller = Value::MakeFunction("caller", [this, stmt, env](Interpreter&, const CallArgs& a) {
    ScopePtr parent = env.lock();
    if (!parent) Throw("caller() used after its scope ended");
    DepthGuard guard(macro_depth_, limits_.max_macro_depth);
    auto call_scope = std::make_shared<Scope>(parent);
    BindParams(*stmt, a, call_scope, "None");
    std::string body;
    int saved = loop_depth_;
    loop_depth_ = 0;
    Flow f = RenderBody(stmt->body, call_scope, body);
    loop_depth_ = saved;
    if (f != Flow::kNormal) Throw("break/continue outside of a loop");
    return Value::Str(std::move(body));
  });
  CallArgs args = EvalArgs(st.expr->items, scope);
  args.caller = std::make_shared<const Value>(caller);
  Value fn = Eval(*st.expr->a, scope);
  Value v = CallFunction(fn, args);
  if (!v.is_none() && !v.is_undefined()) Append(out, ToDisplayString(v));
}

Value Interpreter::CallFunction(const Value& fn, const CallArgs& args) {
  if (!fn.is_function()) Throw("Cannot call something that is not a function: got ", fn.TypeName());
  return fn.function().fn(*this, args);
}

CallArgs Interpreter::EvalArgs(const std::vector<ExprPtr>& args, const ScopePtr& scope) {
  CallArgs out;
  for (const auto& a : args) {
    if (a->kind == Expr::Kind::kSpread) {
      Value v = Eval(*a->a, scope);
      if (!v.is_array()) Throw("Cannot unpack non-iterable type: ", v.TypeName());
      for (const Value& item : v.array().items) out.positional.push_back(item);
    } else if (a->kind != Expr::Kind::kKwarg && a->kind != Expr::Kind::kKwSpread) {
      out.positional.push_back(Eval(*a, scope));
    }
  }
  auto add = [&](const std::string& k, Value v) {
    if (out.Kwarg(k)) Throw("Got multiple values for keyword argument '", k, "'");
    out.kwargs.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == Expr::Kind::kKwarg) {
      add(a->name, Eval(*a->a, scope));
    } else if (a->kind == Expr::Kind::kKwSpread) {
      Value v = Eval(*a->a, scope);
      if (!v.is_object()) Throw("Argument after ** must be a mapping, not ", v.TypeName());
      for (const auto& [k, item] : v.object().entries()) add(k, item);
    }
  }
  return out;
}

Value Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(depth_, limits_.max_eval_depth);
  ChargeWork(1);
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kIdent:
      return scope->Lookup(e.name);
    case Expr::Kind::kArray:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      for (const auto& i : e.items) items.push_back(Eval(*i, scope));
      return Value::MakeArray(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kObject: {
      auto obj = std::make_shared<Object>();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = Eval(*e.items[i], scope);
        if (!k.is_string()) Throw("Object keys must be strings: got ", k.TypeName());
        obj->Set(k.str(), Eval(*e.items[i + 1], scope));
      }
      return Value::MakeObject(std::move(obj));
    }
    case Expr::Kind::kMember:
      return EvalMember(e, scope);
    case Expr::Kind::kCall: {
      CallArgs args = EvalArgs(e.items, scope);
      Value fn = Eval(*e.a, scope);
      return CallFunction(fn, args);
    }
    case Expr::Kind::kFilter:
      return EvalFilter(e, Eval(*e.a, scope), scope);
    case Expr::Kind::kTest: {
      Value operand = Eval(*e.a, scope);
      CallArgs args = EvalArgs(e.items, scope);
      bool r = ApplyTest(e.name, operand, args);
      return Value::Bool(e.negate ? !r : r);
    }
    case Expr::Kind::kUnary: {
      Value v = Eval(*e.a, scope);
      if (e.name == "not") return Value::Bool(!Truthy(v));
      int sign = e.name == "-" ? -1 : 1;
      if (v.is_float()) return Value::Float(sign * v.as_float());
      if (v.is_int()) return Value::Int(sign < 0 ? -v.as_int() : v.as_int());
      if (v.is_bool()) return Value::Int(sign * (v.as_bool() ? 1 : 0));
      Throw("Unknown operator \"", e.name, "\" for ", v.TypeName());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, scope);
    case Expr::Kind::kTernary:
      return Truthy(Eval(*e.a, scope)) ? Eval(*e.b, scope) : Eval(*e.c, scope);
    case Expr::Kind::kSelect:
      return Truthy(Eval(*e.b, scope)) ? Eval(*e.a, scope) : Value();
    case Expr::Kind::kSlice:
    case Expr::Kind::kKwarg:
    case Expr::Kind::kSpread:
    case Expr::Kind::kKwSpread:
      Throw("unexpected expression here");
  }
  return Value();
}

Value Interpreter::EvalFilter(const Expr& e, const Value& operand, const ScopePtr& scope) {
  if (!e.has_args) return ApplyFilter(e.name, operand, nullptr);
  CallArgs args = EvalArgs(e.items, scope);
  return ApplyFilter(e.name, operand, &args);
}

Value Interpreter::EvalMember(const Expr& e, const ScopePtr& scope) {
  Value object = Eval(*e.a, scope);
  const Expr& prop_expr = *e.b;
  if (prop_expr.kind == Expr::Kind::kSlice) {
    if (!object.is_array() && !object.is_string()) Throw("Slice object must be an array or string");
    Value parts[3];
    const Expr* exprs[3] = {prop_expr.a.get(), prop_expr.b.get(), prop_expr.c.get()};
    for (int i = 0; i < 3; ++i) {
      if (exprs[i]) parts[i] = Eval(*exprs[i], scope);
      if (!parts[i].is_int() && !parts[i].is_undefined()) Throw("Slice indices must be integers");
    }
    if (object.is_array()) {
      const auto& items = object.array().items;
      std::vector<Value> out;
      for (size_t i :
           SliceIndices(static_cast<int64_t>(items.size()), parts[0], parts[1], parts[2])) {
        out.push_back(items[i]);
      }
      ChargeWork(static_cast<int64_t>(out.size()));
      return Value::MakeArray(std::move(out));
    }
    std::vector<char32_t> cps = DecodeUtf8(object.str());
    std::string out;
    for (size_t i : SliceIndices(static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2])) {
      AppendUtf8(out, cps[i]);
    }
    ChargeWork(static_cast<int64_t>(out.size() / 64));
    return Value::Str(std::move(out));
  }
  Value prop = Eval(prop_expr, scope);
  if (object.is_object() || object.is_namespace()) {
    if (!prop.is_string()) Throw("Cannot access property with non-string: got ", prop.TypeName());
    const Object& obj = object.is_object() ? object.object() : object.ns();
    if (const Value* v = obj.Find(prop.str())) return *v;
    if (object.is_object()) return GetBuiltinMember(*this, object, prop.str());
    return Value();
  }
  if (object.is_array() || object.is_string()) {
    if (prop.is_int()) {
      int64_t i = prop.as_int();
      if (object.is_array()) {
        const auto& items = object.array().items;
        int64_t n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? items[i] : Value();
      }
      std::vector<char32_t> cps = DecodeUtf8(object.str());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      std::string ch;
      AppendUtf8(ch, cps[i]);
      return Value::Str(std::move(ch));
    }
    if (prop.is_string()) return GetBuiltinMember(*this, object, prop.str());
    Throw("Cannot access property with non-string/non-number: got ", prop.TypeName());
  }
  if (!prop.is_string()) Throw("Cannot access property with non-string: got ", prop.TypeName());
  return Value();
}

Value Interpreter::EvalBinary(const Expr& e, const ScopePtr& scope) {
  const std::string& op = e.name;
  Value left = Eval(*e.a, scope);
  if (op == "and") return Truthy(left) ? Eval(*e.b, scope) : left;
  if (op == "or") return Truthy(left) ? left : Eval(*e.b, scope);
  Value right = Eval(*e.b, scope);
  if (op == "==") return Value::Bool(LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!LooseEquals(left, right));

  if (IsNumeric(left) && IsNumeric(right) && op != "~" && op != "**") {
    bool is_float = left.is_float() || right.is_float();
    if (!is_float) {
      int64_t a = left.as_int(), b = right.as_int(), r = 0;
      if (op == "+" && !__builtin_add_overflow(a, b, &r)) return Value::Int(r);
      if (op == "-" && !__builtin_sub_overflow(a, b, &r)) return Value::Int(r);
      if (op == "*" && !__builtin_mul_overflow(a, b, &r)) return Value::Int(r);
      if (op == "//" || op == "%") {
        if (b == 0) Throw("integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) return op == "%" ? Value::Int(0) : Value::Float(-(double)a);
        if (op == "%") return Value::Int(a % b);  // JS remainder: sign of the dividend
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return Value::Int(q);
      }
    }
    double a = left.as_number(), b = right.as_number();
    if (op == "+") return Value::Float(a + b);
    if (op == "-") return Value::Float(a - b);
    if (op == "*") return Value::Float(a * b);
    if (op == "/") {
      if (b == 0) Throw("division by zero");
      return Value::Float(a / b);
    }
    if (op == "//") {
      if (b == 0) Throw("division by zero");
      return Value::Float(std::floor(a / b));
    }
    if (op == "%") {
      if (b == 0) Throw("modulo by zero");
      return Value::Float(std::fmod(a, b));
    }
    if (op == "<") return Value::Bool(a < b);
    if (op == ">") return Value::Bool(a > b);
    if (op == "<=") return Value::Bool(a <= b);
    if (op == ">=") return Value::Bool(a >= b);
  } else if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::Bool(op == "not in");
    if (op == "~" && !left.is_none() && !right.is_none()) {
      std::string s = (left.is_undefined() ? "" : JsValueString(left)) +
                      (right.is_undefined() ? "" : JsValueString(right));
      CheckString(s.size());
      return Value::Str(std::move(s));
    }
    Throw("Cannot perform operation ", op, " on undefined values");
  } else if (left.is_none() || right.is_none()) {
    Throw("Cannot perform operation on null values");
  } else if (op == "~") {
    std::string s = JsValueString(left);
    std::string r = JsValueString(right);
    CheckString(s.size() + r.size());
    ChargeWork(static_cast<int64_t>((s.size() + r.size()) / 64));
    return Value::Str(s + r);
  } else if (op == "**" && (IsNumeric(left) || left.is_bool()) &&
             (IsNumeric(right) || right.is_bool())) {
    auto num = [](const Value& v) {
      return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number();
    };
    double a = num(left), b = num(right);
    if (a == 0 && b < 0) Throw("0.0 cannot be raised to a negative power");
    double r = std::pow(a, b);
    if (!std::isfinite(r)) Throw("Exponentiation result is not a finite real number");
    if (left.is_float() || right.is_float() || b < 0 || std::fabs(r) >= 9.0e18) {
      return Value::Float(r);
    }
    return Value::Int(static_cast<int64_t>(r));
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      std::vector<Value> items = left.array().items;
      const auto& r = right.array().items;
      CheckArray(items.size() + r.size());
      ChargeWork(static_cast<int64_t>(items.size() + r.size()));
      items.insert(items.end(), r.begin(), r.end());
      return Value::MakeArray(std::move(items));
    }
  } else if (right.is_array()) {
    if (op == "in" || op == "not in") {
      bool member = false;
      ChargeWork(static_cast<int64_t>(right.array().items.size()));
      for (const Value& x : right.array().items) {
        if (StrictEquals(x, left)) {
          member = true;
          break;
        }
      }
      return Value::Bool(op == "in" ? member : !member);
    }
  }
  if ((left.is_string() || right.is_string()) && op == "+") {
    std::string s = JsValueString(left);
    std::string r = JsValueString(right);
    CheckString(s.size() + r.size());
    ChargeWork(static_cast<int64_t>((s.size() + r.size()) / 64));
    return Value::Str(s + r);
  }
  if (left.is_string() && right.is_string()) {
    if (op == "in") return Value::Bool(right.str().find(left.str()) != std::string::npos);
    if (op == "not in") return Value::Bool(right.str().find(left.str()) == std::string::npos);
    // String ordering (Python Jinja; HF has none).
    int c = left.str().compare(right.str());
    if (op == "<") return Value::Bool(c < 0);
    if (op == ">") return Value::Bool(c > 0);
    if (op == "<=") return Value::Bool(c <= 0);
    if (op == ">=") return Value::Bool(c >= 0);
  }
  if (left.is_string() && right.is_object()) {
    if (op == "in") return Value::Bool(right.object().Find(left.str()) != nullptr);
    if (op == "not in") return Value::Bool(right.object().Find(left.str()) == nullptr);
  }
  Throw("Unknown operator \"", op, "\" between ", left.TypeName(), " and ", right.TypeName());
}

}  // namespace moeserve::chat::jinja
