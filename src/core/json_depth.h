// Nesting depth of JSON text, measured without parsing it. Client JSON is bounded before any
// parser or recursive walk (copies, template values) sees it: a body nesting ~100k levels deep
// overflowed the stack in recursive copies. nlohmann's parser itself is iterative, but much of
// what consumes its values is not.
#pragma once

#include <cstddef>
#include <string_view>

namespace moeserve {

// Deepest nesting of '[' / '{' outside string literals (escapes honoured). Well-formed or not:
// the count stops being meaningful only after the text has stopped being JSON, and the parser
// rejects that text anyway.
size_t JsonNestingDepth(std::string_view text);

// The bound the server applies to every request body and to JSON carried inside strings
// (tool-call arguments): deeper than any real schema or message, far from the stack's limit.
inline constexpr size_t kMaxJsonDepth = 128;

}  // namespace moeserve
