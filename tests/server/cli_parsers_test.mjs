// Parsers chosen by vLLM's names (issue 13 item 5), through the scripted engine: every request
// replays a file, so `--tool-call-parser hermes` (which used to turn parsing off), qwen3_coder and
// `--reasoning-parser minimax_m2_append_think` are checked on what the client receives. --help
// lists the registry's parsers.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BIN, startServer, test, run, writeTemp } from './harness.mjs';

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer' } } } } },
];
const user = [{ role: 'user', content: 'Weather in Paris?' }];

async function reply(text, args, body = {}) {
  const s = await startServer(['--scripted-output', writeTemp('reply.txt', text), ...args]);
  try {
    const r = await s.client().chat.completions.create({ model: 'model', messages: user, tools: TOOLS, ...body });
    return r.choices[0];
  } finally { await s.stop(); }
}

test('--tool-call-parser hermes parses <tool_call>{json}</tool_call>', async () => {
  const c = await reply('I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>',
    ['--tool-call-parser', 'hermes', '--reasoning-parser', 'none']);
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, 'I will check.\n');
  assert.equal(c.message.tool_calls.length, 1);
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: 'Paris', days: 2 });
});

test('--tool-call-parser qwen3_coder parses <function=..> blocks, typed by the schema', async () => {
  const c = await reply('<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n' +
    '<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>',
    ['--tool-call-parser', 'qwen3_coder', '--reasoning-parser', 'none']);
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(c.message.tool_calls[0].function.arguments, '{"city": "Paris", "days": 3}');
});

test('--reasoning-parser minimax_m2_append_think keeps the thinking in the content', async () => {
  const c = await reply('Two and two.\n</think>\n\nFour.', ['--reasoning-parser', 'minimax_m2_append_think'], { tools: undefined });
  assert.equal(c.message.content, '<think>Two and two.\n</think>\n\nFour.');
  assert.ok(!c.message.reasoning_content);
});

test('--help lists the registry parsers; unknown names are refused', () => {
  const help = execFileSync(BIN, ['serve', '--help']).toString();
  for (const name of ['minimax_m2', 'minimax_m2_append_think', 'qwen3', 'deepseek_r1', 'hermes', 'qwen3_coder', 'qwen3_xml'])
    assert.match(help, new RegExp(`\\b${name}: `), name);
  assert.throws(() => execFileSync(BIN, ['serve', '--tool-call-parser', 'nonesuch'], { stdio: 'pipe' }));
});

await run();
