// Bounds on the work one request may ask for, checked before that work is done, so that a small
// body cannot buy a large share of the server: every limit is a `moeserve serve` flag, and going
// over one is a 400 whose message names the limit and the flag.
//
// Defaults follow the OpenAI API where it states a bound (128 tools, n <= 128) and stay far above
// what real clients send elsewhere; vLLM has no such bounds, so its clients never meet these.
#pragma once

#include <cstddef>
#include <string_view>

#include "server/api_error.h"

namespace moeserve::server {

struct RequestLimits {
  // Engine sequences one request creates: prompts x n (completions), n (chat). vLLM's default
  // --max-num-seqs: one request may fill a whole batch but not queue thousands.
  size_t max_sequences = 256;
  // Chat messages; checked before the template renders them.
  size_t max_messages = 2048;
  // Stop strings: how many, and their bytes together (stop matching runs on the engine thread,
  // its cost per token grows with both).
  size_t max_stop_strings = 64;
  size_t max_stop_bytes = 16384;
  // Tools: how many (OpenAI's limit) and their JSON bytes together (schemas are rendered into
  // every prompt and kept by the tool-call parser).
  size_t max_tools = 128;
  size_t max_tools_bytes = 1u << 20;
};

// 400 when `value` > `limit`: "<what> (<value>) is more than the limit of <limit> (--<flag>)".
void CheckLimit(size_t value, size_t limit, std::string_view what, std::string_view flag,
                std::string_view param);

// The names the chat renderer sets itself (messages, tools, add_generation_prompt, bos_token,
// ...) and the template globals (raise_exception, range, ...): a `chat_template_kwargs` key that
// would replace one of them is refused, so the validated messages and tools are what renders.
bool IsReservedTemplateVariable(std::string_view name);

}  // namespace moeserve::server
