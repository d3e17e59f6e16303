// tool_choice through the server on the bundled model at temperature 1.0 with several seeds,
// streamed and not: "required" and a named function constrain the reply to the model's own
// tool-call syntax (MiniMax-M2 XML; Qwen3 JSON with --tool-call-parser hermes), so 100% of the
// replies are tool calls whose arguments parse and validate (ajv) against their tool's schema;
// parallel_tool_calls false gives exactly one call; "auto" stays unconstrained. The same through
// the Anthropic Messages API (tool_choice any / tool, disable_parallel_tool_use; the official
// @anthropic-ai/sdk client) and the OpenAI Responses API (tool_choice required / function,
// parallel_tool_calls false; text.format json_schema constrains its output_text).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startServer, test, run, post, requireModule } from './harness.mjs';

const AnthropicModule = requireModule('@anthropic-ai/sdk');
const Anthropic = AnthropicModule.default ?? AnthropicModule;

const require = createRequire(path.join(process.env.MOESERVE_NODE_MODULES || '.', 'x.js'));
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const fn = (name, parameters, description = '') => ({ type: 'function', function: { name, description, parameters } });
const TOOLS = [
  fn('get_weather', { type: 'object', properties: { city: { type: 'string', maxLength: 20 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city'] }, 'Current weather for a city'),
  fn('search_web', { type: 'object', properties: { query: { type: 'string', maxLength: 30 },
    max_results: { type: 'integer', minimum: 1, maximum: 10 }, safe: { type: 'boolean' } }, required: ['query', 'max_results'] }),
  fn('create_event', { type: 'object', properties: { title: { type: 'string', maxLength: 20 },
    date: { type: 'string', format: 'date' }, attendees: { type: 'array', items: { type: 'string', pattern: '^[a-z]{1,12}@[a-z]{1,10}\\.(com|org)$' }, maxItems: 2 },
    location: { anyOf: [{ type: 'string', maxLength: 16 }, { type: 'null' }] } }, required: ['title', 'date'] }),
  fn('run_sql', { type: 'object', properties: { query: { type: 'string', maxLength: 40 },
    params: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 100 } }, required: ['limit'], additionalProperties: false },
    max_cost: { type: 'number', minimum: 0, maximum: 100 } }, required: ['query', 'params'] }),
  fn('get_time', { type: 'object', properties: {} }, 'The current time'),
];
const VALIDATORS = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const MESSAGES = [{ role: 'user', content: 'What is the weather in Paris, and what time is it?' }];
const COMMON = ['--served-model-name', 'model', '--kv-cache-memory', String(256 << 20), '--max-model-len', '4096', '--threads', '2', '--max-num-seqs', '32'];
const MAX_TOKENS = 600;
// The tools prompt is 1.5k tokens with the bundled model's small tokenizer, past its 1024
// positions: the replies are as random as ever, and the grammar constrains them all the same.
const LONG = { env: { VLLM_ALLOW_LONG_MAX_MODEL_LEN: '1' } };

// Choices as a client sees them: [{content, calls: [{name, arguments}], finish}].
async function chat(client, extra, { stream = false, n = 2, seed = 1 } = {}) {
  const body = { model: 'model', messages: MESSAGES, tools: TOOLS, max_tokens: MAX_TOKENS, temperature: 1.0, n, seed, ...extra };
  if (!stream) {
    const r = await client.chat.completions.create(body);
    return r.choices.map((c) => ({ content: c.message.content, finish: c.finish_reason,
      calls: (c.message.tool_calls ?? []).map((t) => ({ name: t.function.name, arguments: t.function.arguments })) }));
  }
  const out = Array.from({ length: n }, () => ({ content: '', calls: [], finish: null }));
  for await (const ch of await client.chat.completions.create({ ...body, stream: true })) {
    for (const c of ch.choices) {
      const o = out[c.index];
      o.content += c.delta?.content ?? '';
      for (const t of c.delta?.tool_calls ?? []) {
        o.calls[t.index] ??= { name: '', arguments: '' };
        if (t.function?.name) o.calls[t.index].name = t.function.name;
        o.calls[t.index].arguments += t.function?.arguments ?? '';
      }
      o.finish = c.finish_reason ?? o.finish;
    }
  }
  return out;
}

function checkCalls(choices, what, { exactlyOne = false, only = null } = {}) {
  for (const c of choices) {
    const shown = JSON.stringify(c);
    assert.equal(c.finish, 'tool_calls', `${what}: ${shown}`);
    assert.ok(c.calls.length >= 1, `${what}: no tool call: ${shown}`);
    if (exactlyOne) assert.equal(c.calls.length, 1, `${what}: ${shown}`);
    assert.ok(!c.content, `${what}: content beside the calls: ${shown}`);
    for (const call of c.calls) {
      if (only) assert.equal(call.name, only, `${what}: ${shown}`);
      const validate = VALIDATORS[call.name];
      assert.ok(validate, `${what}: unknown function ${call.name}`);
      let args;
      try { args = JSON.parse(call.arguments); } catch { assert.fail(`${what}: arguments are not JSON: ${shown}`); }
      assert.ok(validate(args), `${what}: ${call.name} ${call.arguments}: ${ajv.errorsText(validate.errors)}`);
    }
  }
  return choices.reduce((k, c) => k + c.calls.length, 0);
}

async function all(jobs) {
  return Promise.all(jobs.map((j) => j()));
}

// Reasoning off: the constraint applies from the first token (the reasoning test turns it on).
const s = await startServer([...COMMON, '--reasoning-parser', 'none'], LONG);
const client = s.client();

test('tool_choice "required": every reply is tool calls with valid arguments (streamed and not, 8 seeds)', async () => {
  const jobs = [];
  for (let seed = 1; seed <= 4; ++seed)
    for (const stream of [false, true])
      jobs.push(() => chat(client, { tool_choice: 'required' }, { stream, seed, n: 2 })
        .then((c) => checkCalls(c, `required seed ${seed}${stream ? ' streamed' : ''}`)));
  const calls = await all(jobs);
  console.log(`     ${calls.reduce((a, b) => a + b, 0)} calls validated`);
});

test('named tool_choice: exactly one call of that function, valid arguments', async () => {
  const jobs = [];
  for (const name of ['get_weather', 'search_web', 'create_event', 'run_sql', 'get_time'])
    for (const stream of [false, true])
      jobs.push(() => chat(client, { tool_choice: { type: 'function', function: { name } } }, { stream, seed: name.length + (stream ? 50 : 0), n: 2 })
        .then((c) => checkCalls(c, `named ${name}`, { exactlyOne: true, only: name })));
  await all(jobs);
});

test('parallel_tool_calls false: exactly one call', async () => {
  const jobs = [];
  for (let seed = 1; seed <= 3; ++seed)
    for (const stream of [false, true])
      jobs.push(() => chat(client, { tool_choice: 'required', parallel_tool_calls: false }, { stream, seed, n: 2 })
        .then((c) => checkCalls(c, `parallel false seed ${seed}`, { exactlyOne: true })));
  await all(jobs);
});

// The other chat routes: each reply mapped to the same shape as chat() returns, the finish reason
// mapped back to chat's ("tool_use" / "completed" with calls -> "tool_calls").
const ANTHROPIC_TOOLS = TOOLS.map((t) => ({ name: t.function.name, description: t.function.description,
  input_schema: t.function.parameters }));
const RESPONSES_TOOLS = TOOLS.map((t) => ({ type: 'function', name: t.function.name,
  description: t.function.description, parameters: t.function.parameters }));

async function messages(anthropic, extra, { stream = false } = {}) {
  const body = { model: 'model', messages: MESSAGES, tools: ANTHROPIC_TOOLS, max_tokens: MAX_TOKENS, temperature: 1.0, ...extra };
  const m = stream ? await anthropic.messages.stream(body).finalMessage() : await anthropic.messages.create(body);
  const calls = m.content.filter((b) => b.type === 'tool_use').map((b) => ({ name: b.name, arguments: JSON.stringify(b.input) }));
  const content = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  return [{ content, calls, finish: m.stop_reason === 'tool_use' ? 'tool_calls' : m.stop_reason }];
}

async function responses(openai, extra, { stream = false } = {}) {
  const body = { model: 'model', input: MESSAGES[0].content, tools: RESPONSES_TOOLS, max_output_tokens: MAX_TOKENS, temperature: 1.0, ...extra };
  const r = stream ? await openai.responses.stream(body).finalResponse() : await openai.responses.create(body);
  const calls = r.output.filter((o) => o.type === 'function_call').map((o) => ({ name: o.name, arguments: o.arguments }));
  const content = r.output.filter((o) => o.type === 'message').flatMap((o) => o.content.map((c) => c.text ?? '')).join('');
  return [{ content, calls, finish: r.status === 'completed' && calls.length ? 'tool_calls' : r.status }];
}

test('Anthropic Messages: tool_choice any / tool / disable_parallel_tool_use constrain the reply to valid tool calls', async () => {
  const anthropic = new Anthropic({ baseURL: s.base, apiKey: 'none', maxRetries: 0 });
  const jobs = [];
  for (let k = 0; k < 3; ++k)
    for (const stream of [false, true]) {
      jobs.push(() => messages(anthropic, { tool_choice: { type: 'any' } }, { stream })
        .then((c) => checkCalls(c, `anthropic any #${k}${stream ? ' streamed' : ''}`)));
      jobs.push(() => messages(anthropic, { tool_choice: { type: 'any', disable_parallel_tool_use: true } }, { stream })
        .then((c) => checkCalls(c, `anthropic any, one call #${k}${stream ? ' streamed' : ''}`, { exactlyOne: true })));
    }
  TOOLS.forEach((t, i) => {
    const name = t.function.name;
    jobs.push(() => messages(anthropic, { tool_choice: { type: 'tool', name } }, { stream: i % 2 === 1 })
      .then((c) => checkCalls(c, `anthropic tool ${name}`, { exactlyOne: true, only: name })));
  });
  const calls = await all(jobs);
  console.log(`     ${jobs.length} replies, ${calls.reduce((a, b) => a + b, 0)} calls validated`);
});

test('OpenAI Responses: tool_choice required / function / parallel_tool_calls false constrain the reply to valid tool calls', async () => {
  const jobs = [];
  for (let k = 0; k < 3; ++k)
    for (const stream of [false, true]) {
      jobs.push(() => responses(client, { tool_choice: 'required' }, { stream })
        .then((c) => checkCalls(c, `responses required #${k}${stream ? ' streamed' : ''}`)));
      jobs.push(() => responses(client, { tool_choice: 'required', parallel_tool_calls: false }, { stream })
        .then((c) => checkCalls(c, `responses required, one call #${k}${stream ? ' streamed' : ''}`, { exactlyOne: true })));
    }
  TOOLS.forEach((t, i) => {
    const name = t.function.name;
    jobs.push(() => responses(client, { tool_choice: { type: 'function', name } }, { stream: i % 2 === 0 })
      .then((c) => checkCalls(c, `responses function ${name}`, { exactlyOne: true, only: name })));
  });
  const calls = await all(jobs);
  console.log(`     ${jobs.length} replies, ${calls.reduce((a, b) => a + b, 0)} calls validated`);
});

test('OpenAI Responses: text.format json_schema constrains the reply (output_text validates); a bad schema is a 400', async () => {
  const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
    days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'], additionalProperties: false };
  const validate = ajv.compile(schema);
  const jobs = [];
  for (let k = 0; k < 3; ++k)
    for (const stream of [false, true])
      jobs.push(async () => {
        const body = { model: 'model', input: MESSAGES[0].content, max_output_tokens: MAX_TOKENS, temperature: 1.0,
          text: { format: { type: 'json_schema', name: 'weather', schema, strict: true } } };
        const r = stream ? await client.responses.stream(body).finalResponse() : await client.responses.create(body);
        const what = `text.format #${k}${stream ? ' streamed' : ''}`;
        assert.equal(r.status, 'completed', `${what}: ${r.status}`);
        const value = JSON.parse(r.output_text);
        assert.ok(validate(value), `${what}: ${r.output_text}: ${ajv.errorsText(validate.errors)}`);
        return 1;
      });
  await all(jobs);
  const bad = await post(s.base, '/v1/responses', { model: 'model', input: 'hi',
    text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', patternProperties: { a: {} } } } } });
  assert.equal(bad.status, 400, bad.text);
  assert.match(bad.json.error.message, /patternProperties/);
});

test('tool_choice "auto" stays unconstrained (the bundled model answers in text)', async () => {
  const choices = await chat(client, { tool_choice: 'auto', max_tokens: 40 }, { n: 4, seed: 3 });
  assert.ok(choices.some((c) => c.calls.length === 0 && c.content), JSON.stringify(choices));
});

test('a tool_choice that constrains plus a response format is a 400; so is an unsupported tool schema', async () => {
  const r = await post(s.base, '/v1/chat/completions', { messages: MESSAGES, tools: TOOLS, tool_choice: 'required',
    response_format: { type: 'json_object' } });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /tool_choice/);
  const bad = [fn('f', { type: 'object', properties: { x: { type: 'string', not: { const: 'a' } } } })];
  const b = await post(s.base, '/v1/chat/completions', { messages: MESSAGES, tools: bad, tool_choice: 'required' });
  assert.equal(b.status, 400, b.text);
  assert.match(b.json.error.message, /tool 'f'.*'not'/);
});

// As vLLM's structured outputs, the constraint starts when the reasoning ends: a reply that ends
// its turn inside the reasoning (EOS before </think>; the bundled model does so once the prompt
// carries tools) never reaches it and has no call, but never holds anything else. A reply that
// closes its reasoning is tool calls only (a prefilled reasoning makes sure some do).
test('reasoning parser active: thinks freely, then calls tools', async () => {
  const r = await startServer([...COMMON], LONG);
  try {
    const c = r.client();
    const free = await chat(c, { tool_choice: 'required', max_tokens: 300 }, { n: 4, seed: 11 });
    for (const x of free) {
      if (x.calls.length === 0) assert.ok(x.finish === 'stop' && !x.content, JSON.stringify(x));
      else checkCalls([x], 'required with reasoning');
    }
    // The reasoning already closed in the (continued) assistant message: calls from the start.
    const closed = await chat(c, { tool_choice: 'required', continue_final_message: true, add_generation_prompt: false,
      messages: [...MESSAGES, { role: 'assistant', content: '<think>\nI should call a tool.\n</think>\n\n' }] },
    { n: 3, seed: 12 });
    checkCalls(closed, 'required after a closed reasoning');
  } finally {
    await r.stop();
  }
});

test('Qwen3 tool-call syntax (--tool-call-parser hermes): required and named', async () => {
  const r = await startServer([...COMMON, '--reasoning-parser', 'none', '--tool-call-parser', 'hermes'], LONG);
  try {
    const c = r.client();
    // One call: this model does not know the Qwen3 syntax and, allowed more, keeps calling.
    checkCalls(await chat(c, { tool_choice: 'required', parallel_tool_calls: false }, { n: 3, seed: 5 }),
      'qwen3 required', { exactlyOne: true });
    checkCalls(await chat(c, { tool_choice: { type: 'function', function: { name: 'run_sql' } } }, { n: 2, seed: 6, stream: true }),
      'qwen3 named', { exactlyOne: true, only: 'run_sql' });
  } finally {
    await r.stop();
  }
});

await run(async () => { await s.stop(); });
