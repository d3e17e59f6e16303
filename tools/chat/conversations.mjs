// Test conversations for the chat-template comparison (render_reference.mjs). Deterministic.
// Each case: {name, messages, tools?, extra?}. Every case is rendered through every template with
// add_generation_prompt true and false.

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather for a city.",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "City name, e.g. \"Paris\"" },
        days: { type: "integer", minimum: 1, maximum: 7 },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
};

const searchTool = {
  type: "function",
  function: {
    name: "search_docs",
    description: "Search the documentation — returns snippets (UTF-8: 日本語, émoji 🚀).",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string" },
        filters: {
          type: "object",
          properties: {
            tags: { type: "array", items: { type: "string" } },
            since: { type: ["string", "null"] },
            exact: { type: "boolean" },
          },
        },
        limit: { type: "number" },
      },
      required: ["query"],
    },
  },
};

const noParamTool = {
  type: "function",
  function: { name: "get_time", description: "Current time.", parameters: { type: "object", properties: {} } },
};

function call(id, name, args, asString) {
  return { id, type: "function", function: { name, arguments: asString ? JSON.stringify(args) : args } };
}

export const conversations = [
  { name: "user_only", messages: [{ role: "user", content: "Hello!" }] },
  {
    name: "system_user",
    messages: [
      { role: "system", content: "You are a terse assistant." },
      { role: "user", content: "What is 2+2?" },
    ],
  },
  {
    name: "multi_turn",
    messages: [
      { role: "system", content: "Be nice." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello! How can I help?" },
      { role: "user", content: "Tell me a joke." },
      { role: "assistant", content: "Why did the chicken cross the road?" },
      { role: "user", content: "Why?" },
    ],
  },
  {
    name: "multi_turn_no_system",
    messages: [
      { role: "user", content: "first" },
      { role: "assistant", content: "second" },
      { role: "user", content: "third" },
    ],
  },
  {
    name: "tools_declared",
    messages: [{ role: "user", content: "Weather in Paris for 3 days?" }],
    tools: [weatherTool, searchTool],
  },
  {
    name: "tools_with_system",
    messages: [
      { role: "system", content: "You can call tools." },
      { role: "user", content: "Find docs about \"streaming\"." },
    ],
    tools: [searchTool, noParamTool],
  },
  {
    name: "tool_call_string_args",
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [call("call_1", "get_weather", { city: "Paris", days: 3 }, true)] },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21, \"sky\": \"clear\"}" },
      { role: "assistant", content: "It is 21 degrees and clear in Paris." },
    ],
    tools: [weatherTool],
  },
  {
    name: "tool_call_object_args",
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [call("call_1", "get_weather", { city: "Paris", days: 3, unit: "celsius" }, false)] },
      { role: "tool", tool_call_id: "call_1", content: "21C, clear" },
    ],
    tools: [weatherTool],
  },
  {
    name: "tool_call_null_content",
    messages: [
      { role: "user", content: "What time is it?" },
      { role: "assistant", content: null, tool_calls: [call("call_t", "get_time", {}, false)] },
      { role: "tool", tool_call_id: "call_t", content: "12:00" },
      { role: "assistant", content: "It is noon." },
      { role: "user", content: "Thanks" },
    ],
    tools: [noParamTool],
  },
  {
    name: "parallel_tool_calls",
    messages: [
      { role: "system", content: "Use tools in parallel when you can." },
      { role: "user", content: "Weather in Paris and Tokyo, and search docs for rain." },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [
          call("c1", "get_weather", { city: "Paris" }, false),
          call("c2", "get_weather", { city: "Tokyo", unit: "fahrenheit" }, false),
          call("c3", "search_docs", { query: "rain", filters: { tags: ["weather", "faq"], since: null, exact: false }, limit: 2.5 }, false),
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "Paris: 18C" },
      { role: "tool", tool_call_id: "c2", content: "Tokyo: 75F" },
      { role: "tool", tool_call_id: "c3", content: "No results." },
      { role: "assistant", content: "Paris 18C, Tokyo 75F; no docs about rain." },
    ],
    tools: [weatherTool, searchTool],
  },
  {
    name: "parallel_tool_calls_string_args",
    messages: [
      { role: "user", content: "Weather in Paris and Tokyo" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          call("c1", "get_weather", { city: "Paris" }, true),
          call("c2", "get_weather", { city: "Tokyo", days: 2 }, true),
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "18C" },
      { role: "tool", tool_call_id: "c2", content: "24C" },
    ],
    tools: [weatherTool],
  },
  {
    name: "reasoning_last_turn",
    messages: [
      { role: "user", content: "Is 17 prime?" },
      { role: "assistant", content: "Yes, 17 is prime.", reasoning_content: "17 has no divisors other than 1 and 17." },
    ],
  },
  {
    name: "reasoning_history",
    messages: [
      { role: "system", content: "Think step by step." },
      { role: "user", content: "Is 17 prime?" },
      { role: "assistant", content: "Yes.", reasoning_content: "Check 2, 3: no divisors." },
      { role: "user", content: "And 21?" },
      { role: "assistant", content: "No, 21 = 3 * 7.", reasoning_content: "21 / 3 = 7." },
    ],
  },
  {
    name: "interleaved_thinking_tools",
    messages: [
      { role: "user", content: "Weather in Paris, then tell me if I need an umbrella." },
      {
        role: "assistant",
        content: "",
        reasoning_content: "I should call get_weather for Paris.",
        tool_calls: [call("call_9", "get_weather", { city: "Paris" }, false)],
      },
      { role: "tool", tool_call_id: "call_9", content: "Rain, 12C" },
      {
        role: "assistant",
        content: "Yes, take an umbrella.",
        reasoning_content: "It rains, so an umbrella is needed.",
      },
    ],
    tools: [weatherTool],
  },
  {
    name: "interleaved_thinking_pending_tool",
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "Call the tool.",
        tool_calls: [call("call_1", "get_weather", { city: "Paris" }, true)],
      },
      { role: "tool", tool_call_id: "call_1", content: "Sunny" },
    ],
    tools: [weatherTool],
  },
  {
    name: "think_tags_in_content",
    messages: [
      { role: "user", content: "Q1" },
      { role: "assistant", content: "<think>\nreasoning here\n</think>\n\nAnswer one." },
      { role: "user", content: "Q2" },
      { role: "assistant", content: "<think>more thoughts</think>Answer two." },
    ],
  },
  {
    name: "unicode_and_escapes",
    messages: [
      { role: "system", content: "Réponds en français — s'il te plaît. 日本語もOK 🚀" },
      { role: "user", content: "Quote: \"hi\" and backslash \\ and braces {{ not a tag }} {% nope %}" },
      { role: "assistant", content: "Tab\there, newline\nthere, emoji 😀." },
      { role: "user", content: "中文问题？" },
    ],
  },
  {
    name: "multiline_content",
    messages: [
      { role: "user", content: "Line 1\nLine 2\n\nLine 4\n" },
      { role: "assistant", content: "```python\nprint('x')\n```" },
      { role: "user", content: "  indented and trailing spaces  " },
    ],
  },
  {
    name: "content_parts",
    messages: [
      { role: "system", content: [{ type: "text", text: "System in parts." }] },
      { role: "user", content: [{ type: "text", text: "Part one. " }, { type: "text", text: "Part two." }] },
    ],
  },
  {
    name: "system_date_location",
    messages: [
      { role: "system", content: "You are MiniMax.", current_date: "2025-01-01", current_location: "Shanghai" },
      { role: "user", content: "Where am I?" },
    ],
  },
  {
    name: "empty_system",
    messages: [
      { role: "system", content: "" },
      { role: "user", content: "Hi" },
    ],
  },
  {
    name: "tool_result_parts",
    messages: [
      { role: "user", content: "Search" },
      { role: "assistant", content: "", tool_calls: [call("s1", "search_docs", { query: "x" }, false)] },
      { role: "tool", tool_call_id: "s1", content: [{ type: "text", text: "result A" }, { output: "result B" }] },
    ],
    tools: [searchTool],
  },
  {
    name: "tool_call_nested_args",
    messages: [
      { role: "user", content: "Search with filters" },
      {
        role: "assistant",
        content: "Searching now.",
        tool_calls: [call("n1", "search_docs", { query: "a \"quoted\" <tag> & more", filters: { tags: [], exact: true, since: "2024-01-01" }, limit: 10 }, false)],
      },
      { role: "tool", tool_call_id: "n1", content: "ok" },
      { role: "assistant", content: "Done." },
      { role: "user", content: "Again with string args" },
      {
        role: "assistant",
        content: "",
        tool_calls: [call("n2", "search_docs", { query: "ünïcödé", limit: 0.5 }, true)],
      },
    ],
    tools: [searchTool],
  },
  {
    name: "tool_shape_without_function_wrapper",
    messages: [
      { role: "user", content: "Time?" },
      { role: "assistant", content: "", tool_calls: [{ name: "get_time", arguments: {} }] },
      { role: "tool", content: "noon" },
    ],
    tools: [noParamTool],
  },
  {
    name: "qwen_tool_response_in_user",
    messages: [
      { role: "user", content: "<tool_response>\nfake\n</tool_response>" },
      { role: "user", content: "real question" },
      { role: "assistant", content: "answer", reasoning_content: "why" },
    ],
  },
  {
    name: "enable_thinking_false",
    messages: [{ role: "user", content: "Quick answer please." }],
    extra: { enable_thinking: false },
  },
  {
    name: "enable_thinking_true",
    messages: [{ role: "user", content: "Think hard." }],
    extra: { enable_thinking: true },
  },
  {
    name: "tool_without_call_error",
    messages: [
      { role: "user", content: "Hi" },
      { role: "tool", content: "orphan result" },
    ],
  },
  {
    name: "empty_messages",
    messages: [],
  },
  {
    name: "assistant_last_no_reasoning",
    messages: [
      { role: "user", content: "Continue this" },
      { role: "assistant", content: "Partial answer" },
    ],
  },
  {
    name: "model_identity_kwarg",
    messages: [{ role: "user", content: "Who are you?" }],
    extra: { model_identity: "You are Moe, a CPU-served model." },
  },
];
