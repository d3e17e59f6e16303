// The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) through the official
// @anthropic-ai/sdk against `moeserve serve --scripted-output FILE` (reasoning and tool-call
// replies) and the raw SSE stream, event by event and field by field against Anthropic's
// documented sequence: message_start, then per block content_block_start / content_block_delta /
// content_block_stop (a ping after the first start; a thinking block's deltas end with one
// signature_delta), then message_delta with stop_reason and usage, then message_stop.
import assert from 'node:assert/strict';
import { MODEL, startServer, test, run, writeTemp, post, parseNamedSse, requireModule } from './harness.mjs';

const AnthropicModule = requireModule('@anthropic-ai/sdk');
const Anthropic = AnthropicModule.default ?? AnthropicModule;

const REASONING = 'Let me add two and two.\n</think>\n\nThe answer is 4.';
const TOOLS_REPLY = 'The user wants weather and time.\n</think>\n\n<minimax:tool_call>\n' +
  '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n' +
  '<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_time">\n' +
  '<parameter name="tz">CET</parameter>\n</invoke>\n</minimax:tool_call>';
const TOOLS = [
  { name: 'get_weather', description: 'Weather forecast',
    input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city'] } },
  { name: 'get_time', description: 'Current time',
    input_schema: { type: 'object', properties: { tz: { type: 'string' } } } },
];
const OPENAI_TOOLS = TOOLS.map((t) => ({ type: 'function',
  function: { name: t.name, description: t.description, parameters: t.input_schema } }));
const servers = {};
async function server(name, text, extra = []) {
  if (!servers[name]) servers[name] = await startServer(['--scripted-output', writeTemp('reply.txt', text), ...extra]);
  return servers[name];
}
const anthropic = (s, opts = {}) => new Anthropic({ baseURL: s.base, apiKey: 'none', maxRetries: 0, ...opts });
const user = [{ role: 'user', content: 'What is 2 + 2?' }];
const base = { model: 'model', max_tokens: 200, messages: user };

function checkUsage(u) {
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'])
    assert.equal(typeof u[k], 'number', k);
}

// The stream's shape: event names, a run of one or more deltas of a type as "<type>+" (a
// thinking block's single signature_delta without the "+").
function shape(events) {
  const out = [];
  for (const { event, data } of events) {
    let name = event;
    if (event === 'content_block_start') name += ':' + data.content_block.type;
    if (event === 'content_block_delta') {
      name += ':' + data.delta.type + (data.delta.type === 'signature_delta' ? '' : '+');
      if (out.at(-1) === name && name.endsWith('+')) continue;
    }
    out.push(name);
  }
  return out;
}

async function rawStream(s, body) {
  const r = await post(s.base, '/v1/messages', { ...body, stream: true }, { 'anthropic-version': '2023-06-01' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  return parseNamedSse(r.text);
}

test('messages.create: thinking then text, Anthropic fields', async () => {
  const s = await server('reasoning', REASONING);
  const m = await anthropic(s).messages.create(base);
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, MODEL);  // the served name (vLLM's default: the --model string)
  assert.equal(m.content.length, 2);
  assert.deepEqual(Object.keys(m.content[0]), ['type', 'thinking', 'signature']);
  assert.equal(m.content[0].type, 'thinking');
  assert.equal(m.content[0].thinking, 'Let me add two and two.');
  assert.match(m.content[0].signature, /^[0-9a-f]{64}$/);
  assert.deepEqual(m.content[1], { type: 'text', text: 'The answer is 4.' });
  assert.equal(m.stop_reason, 'end_turn');
  assert.equal(m.stop_sequence, null);
  checkUsage(m.usage);
  const tok = await post(s.base, '/tokenize', { messages: user });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, tok.json.count);
  assert.ok(m.usage.output_tokens > 0);
});

test('stream: the documented event sequence, field by field; the SDK accumulates the same message', async () => {
  const s = await server('reasoning', REASONING);
  const events = await rawStream(s, base);
  assert.deepEqual(shape(events), ['message_start', 'content_block_start:thinking', 'ping',
    'content_block_delta:thinking_delta+', 'content_block_delta:signature_delta', 'content_block_stop',
    'content_block_start:text', 'content_block_delta:text_delta+', 'content_block_stop', 'message_delta',
    'message_stop']);
  const start = events[0].data.message;
  assert.match(start.id, /^msg_/);
  assert.deepEqual({ ...start, id: 'x', usage: null }, { id: 'x', type: 'message', role: 'assistant', model: MODEL,
    content: [], stop_reason: null, stop_sequence: null, usage: null });
  checkUsage(start.usage);
  const starts = events.filter((e) => e.event === 'content_block_start').map((e) => e.data);
  assert.deepEqual(starts, [
    { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
    { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }]);
  const deltas = events.filter((e) => e.event === 'content_block_delta').map((e) => e.data);
  assert.equal(deltas.filter((d) => d.index === 0 && d.delta.type === 'thinking_delta').map((d) => d.delta.thinking).join(''),
    'Let me add two and two.');
  assert.equal(deltas.filter((d) => d.index === 1).map((d) => d.delta.text).join(''), 'The answer is 4.');
  for (const d of deltas) assert.deepEqual(Object.keys(d), ['type', 'index', 'delta']);
  const stops = events.filter((e) => e.event === 'content_block_stop').map((e) => e.data);
  assert.deepEqual(stops, [{ type: 'content_block_stop', index: 0 }, { type: 'content_block_stop', index: 1 }]);
  const md = events.at(-2).data;
  assert.deepEqual(md.delta, { stop_reason: 'end_turn', stop_sequence: null });
  assert.deepEqual(Object.keys(md.usage), ['output_tokens']);
  assert.deepEqual(events.at(-1).data, { type: 'message_stop' });
  assert.deepEqual(events[2].data, { type: 'ping' });

  const client = anthropic(s);
  const final = await client.messages.stream(base).finalMessage();
  const whole = await client.messages.create(base);
  assert.deepEqual(final.content, whole.content, 'the signature_delta gives the same signature');
  assert.equal(final.stop_reason, 'end_turn');
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens -
    final.usage.cache_read_input_tokens);
  // The SDK's event iterator (ping skipped) sees the same sequence.
  const types = [];
  for await (const ev of await client.messages.create({ ...base, stream: true })) types.push(ev.type);
  assert.deepEqual(types, events.filter((e) => e.event !== 'ping').map((e) => e.event));
});

test('tools: tool_use blocks with parsed input, stop_reason tool_use (whole and streamed)', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const body = { ...base, tools: TOOLS };
  const m = await anthropic(s).messages.create(body);
  assert.equal(m.stop_reason, 'tool_use');
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'tool_use', 'tool_use']);
  const [, a, b] = m.content;
  assert.match(a.id, /^toolu_/);
  assert.notEqual(a.id, b.id);
  assert.deepEqual(a, { type: 'tool_use', id: a.id, name: 'get_weather', input: { city: 'Paris', days: 3 } });
  assert.deepEqual(b, { type: 'tool_use', id: b.id, name: 'get_time', input: { tz: 'CET' } });

  const events = await rawStream(s, body);
  assert.deepEqual(shape(events), ['message_start', 'content_block_start:thinking', 'ping',
    'content_block_delta:thinking_delta+', 'content_block_delta:signature_delta', 'content_block_stop',
    'content_block_start:tool_use', 'content_block_delta:input_json_delta+', 'content_block_stop',
    'content_block_start:tool_use', 'content_block_delta:input_json_delta+', 'content_block_stop',
    'message_delta', 'message_stop']);
  const toolStart = events.find((e) => e.event === 'content_block_start' && e.data.content_block.type === 'tool_use');
  assert.deepEqual(Object.keys(toolStart.data.content_block), ['type', 'id', 'name', 'input']);
  assert.deepEqual(toolStart.data.content_block.input, {});
  const json = events.filter((e) => e.data.delta?.type === 'input_json_delta' && e.data.index === 1)
    .map((e) => e.data.delta.partial_json).join('');
  assert.deepEqual(JSON.parse(json), { city: 'Paris', days: 3 });
  assert.equal(events.at(-2).data.delta.stop_reason, 'tool_use');
  const final = await anthropic(s).messages.stream(body).finalMessage();
  assert.deepEqual(final.content.slice(1).map((c) => [c.name, c.input]),
    [['get_weather', { city: 'Paris', days: 3 }], ['get_time', { tz: 'CET' }]]);
});

test('tool_use / tool_result round trip keeps the thinking (it reaches the template)', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const client = anthropic(s);
  const first = await client.messages.create({ ...base, tools: TOOLS,
    messages: [{ role: 'user', content: 'Weather and time in Paris?' }] });
  const results = first.content.filter((b) => b.type === 'tool_use').map((b) => ({
    type: 'tool_result', tool_use_id: b.id, content: b.name === 'get_weather' ? 'sunny' : [{ type: 'text', text: '14:00' }] }));
  const history = [{ role: 'user', content: 'Weather and time in Paris?' },
    { role: 'assistant', content: first.content }, { role: 'user', content: results }];
  const second = await client.messages.create({ ...base, tools: TOOLS, messages: history });
  assert.equal(second.stop_reason, 'tool_use');
  const count = (await client.messages.countTokens({ model: 'model', tools: TOOLS, messages: history })).input_tokens;
  assert.equal(second.usage.input_tokens + second.usage.cache_read_input_tokens, count);
  // The same conversation in OpenAI form, rendered by the same template.
  const calls = first.content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, type: 'function',
    function: { name: b.name, arguments: JSON.stringify(b.input) } }));
  const openai = [{ role: 'user', content: 'Weather and time in Paris?' },
    { role: 'assistant', content: '', reasoning_content: first.content[0].thinking, tool_calls: calls },
    { role: 'tool', tool_call_id: calls[0].id, content: 'sunny' },
    { role: 'tool', tool_call_id: calls[1].id, content: '14:00' }];
  const tok = await post(s.base, '/tokenize', { messages: openai, tools: OPENAI_TOOLS });
  assert.equal(count, tok.json.count);
  const withoutThinking = (await client.messages.countTokens({ model: 'model', tools: TOOLS,
    messages: [history[0], { role: 'assistant', content: first.content.slice(1) }, history[2]] })).input_tokens;
  assert.ok(withoutThinking < count, 'the thinking block is rendered');
});

test('tool_choice: any, a named tool, none', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const client = anthropic(s);
  const any = await client.messages.create({ ...base, tools: TOOLS, tool_choice: { type: 'any' } });
  assert.equal(any.content.filter((b) => b.type === 'tool_use').length, 2);
  const named = await client.messages.create({ ...base, tools: TOOLS, tool_choice: { type: 'tool', name: 'get_time' } });
  assert.deepEqual(named.content.filter((b) => b.type === 'tool_use').map((b) => b.name), ['get_time']);
  const none = await client.messages.create({ ...base, tools: TOOLS, tool_choice: { type: 'none' } });
  assert.equal(none.stop_reason, 'end_turn');
  assert.deepEqual(none.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(none.content[1].text.includes('<invoke name="get_weather">'));
  await assert.rejects(client.messages.create({ ...base, tools: TOOLS, tool_choice: { type: 'tool', name: 'nope' } }),
    (e) => e.status === 400 && e.error.type === 'error' && e.error.error.type === 'invalid_request_error');
});

test('stop_sequences -> stop_sequence; max_tokens -> max_tokens (whole and streamed)', async () => {
  const s = await server('reasoning', REASONING);
  const client = anthropic(s);
  const m = await client.messages.create({ ...base, stop_sequences: ['is 4', 'zzz'] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, 'is 4');
  assert.equal(m.content.at(-1).text, 'The answer ');
  const events = await rawStream(s, { ...base, stop_sequences: ['is 4'] });
  assert.deepEqual(events.at(-2).data.delta, { stop_reason: 'stop_sequence', stop_sequence: 'is 4' });
  const short = await client.messages.create({ ...base, max_tokens: 3 });
  assert.equal(short.stop_reason, 'max_tokens');
  assert.equal(short.usage.output_tokens, 3);
  const shortEvents = await rawStream(s, { ...base, max_tokens: 3 });
  assert.equal(shortEvents.at(-2).data.delta.stop_reason, 'max_tokens');
  assert.equal(shortEvents.at(-2).data.usage.output_tokens, 3);
  // temperature / top_p / top_k / metadata are accepted.
  const sampled = await client.messages.create({ ...base, temperature: 0.5, top_p: 0.9, top_k: 5,
    metadata: { user_id: 'u-1' } });
  assert.equal(sampled.stop_reason, 'end_turn');
});

test('count_tokens and system prompts (string or blocks)', async () => {
  const s = await server('reasoning', REASONING);
  const client = anthropic(s);
  const plain = (await client.messages.countTokens({ model: 'model', messages: user })).input_tokens;
  assert.equal(plain, (await post(s.base, '/tokenize', { messages: user })).json.count);
  const sys = 'You are terse.';
  const asString = (await client.messages.countTokens({ model: 'model', system: sys, messages: user })).input_tokens;
  const asBlocks = (await client.messages.countTokens({ model: 'model', system: [{ type: 'text', text: sys }],
    messages: user })).input_tokens;
  assert.equal(asString, asBlocks);
  assert.equal(asString, (await post(s.base, '/tokenize', { messages: [{ role: 'system', content: sys }, ...user] })).json.count);
  const m = await client.messages.create({ ...base, system: sys });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, asString);
});

test('errors are Anthropic-shaped', async () => {
  const s = await server('reasoning', REASONING);
  let r = await post(s.base, '/v1/messages', { model: 'model', messages: user });
  assert.equal(r.status, 400);
  assert.deepEqual(Object.keys(r.json), ['type', 'error']);
  assert.equal(r.json.type, 'error');
  assert.equal(r.json.error.type, 'invalid_request_error');
  assert.match(r.json.error.message, /max_tokens/);
  r = await post(s.base, '/v1/messages', { ...base, messages: [{ role: 'user', content: [
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.type, 'invalid_request_error');
  r = await post(s.base, '/v1/messages', 'not json');
  assert.equal(r.json.error.type, 'invalid_request_error');
  await assert.rejects(anthropic(s).messages.create({ ...base, model: 'claude-x' }),
    (e) => e.status === 404 && e.error.error.type === 'not_found_error');
  r = await fetch(s.base + '/v1/messages');
  assert.equal(r.status, 405);
  assert.equal((await r.json()).type, 'error');
});

test('x-api-key is honoured like Bearer; 401 is Anthropic-shaped', async () => {
  const s = await startServer(['--scripted-output', writeTemp('reply.txt', REASONING), '--api-key', 'sk-test']);
  try {
    const m = await anthropic(s, { apiKey: 'sk-test' }).messages.create({ ...base, max_tokens: 2 });
    assert.equal(m.type, 'message');
    await assert.rejects(anthropic(s, { apiKey: 'wrong' }).messages.create(base),
      (e) => e.status === 401 && e.error.type === 'error' && e.error.error.type === 'authentication_error');
    const bearer = await post(s.base, '/v1/messages', { ...base, max_tokens: 2 }, { authorization: 'Bearer sk-test' });
    assert.equal(bearer.status, 200);
    const none = await post(s.base, '/v1/messages', base);
    assert.equal(none.status, 401);
    assert.equal(none.json.error.type, 'authentication_error');
    // The OpenAI routes take x-api-key too.
    const chat = await post(s.base, '/v1/chat/completions', { messages: user, max_tokens: 2 }, { 'x-api-key': 'sk-test' });
    assert.equal(chat.status, 200);
  } finally {
    await s.stop();
  }
});

await run(async () => { for (const s of Object.values(servers)) await s.stop(); });
