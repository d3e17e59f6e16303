// Chat / completions details vLLM clients rely on (issue 13 item 4), against the scripted engine:
// `reasoning` beside `reasoning_content` (emitted and accepted), stop_reason, stop token text,
// models.retrieve, priority, prompt_logprobs, chat echo, truncate_prompt_tokens, bad_words /
// allowed_token_ids checks and the one-line warning naming ignored fields.
import assert from 'node:assert/strict';
import { startServer, test, run, writeTemp, post, parseSse, sleep } from './harness.mjs';

const REASONING = 'Let me add two and two.\n</think>\n\nThe answer is 4.';
const TEXT = 'Hello there! The answer is 42, said the machine.';
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const servers = {};
async function server(name, text) {
  if (!servers[name]) servers[name] = await startServer(['--scripted-output', writeTemp('reply.txt', text)]);
  return servers[name];
}
const user = [{ role: 'user', content: 'What is 2 + 2?' }];

test('reasoning: emitted as both reasoning and reasoning_content (whole and streamed)', async () => {
  const s = await server('reasoning', REASONING);
  const r = await s.client().chat.completions.create({ model: 'model', messages: user });
  assert.equal(r.choices[0].message.reasoning, 'Let me add two and two.');
  assert.equal(r.choices[0].message.reasoning_content, 'Let me add two and two.');
  const stream = await s.client().chat.completions.create({ model: 'model', messages: user, stream: true });
  let reasoning = '', reasoningContent = '';
  for await (const ch of stream) {
    const d = ch.choices[0]?.delta ?? {};
    assert.equal(d.reasoning, d.reasoning_content, 'both spellings carry the same delta');
    reasoning += d.reasoning ?? '';
    reasoningContent += d.reasoning_content ?? '';
  }
  assert.equal(reasoning, 'Let me add two and two.');
  assert.equal(reasoningContent, reasoning);
});

test('reasoning: an assistant turn\'s `reasoning` reaches the template as reasoning_content', async () => {
  const s = await server('reasoning', REASONING);
  const turn = (extra) => [...user,
    { role: 'assistant', content: '', ...extra,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }];
  const thought = 'I should look up the weather in Paris before answering.';
  const count = async (messages) => (await s.client().chat.completions.create(
    { model: 'model', messages, tools: TOOLS, max_tokens: 1 })).usage.prompt_tokens;
  const none = await count(turn({}));
  const asContent = await count(turn({ reasoning_content: thought }));
  const asReasoning = await count(turn({ reasoning: thought }));
  assert.ok(asContent > none, 'reasoning_content is rendered');
  assert.equal(asReasoning, asContent);
  const tok = await post(s.base, '/tokenize', { messages: turn({ reasoning: thought }), tools: TOOLS });
  assert.equal(tok.json.count, asContent, '/tokenize renders it too');
});

test('stop_reason: the stop string, the stop token id, null for EOS (chat and completions)', async () => {
  const s = await server('text', TEXT);
  const c = s.client();
  let r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stop: ['42'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].stop_reason, '42');
  r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100 });
  assert.equal(r.choices[0].stop_reason, null);
  r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 2 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].stop_reason, null);
  const ids = (await post(s.base, '/tokenize', { prompt: TEXT, add_special_tokens: false })).json.tokens;
  const stopId = ids[3];
  r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stop_token_ids: [stopId] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].stop_reason, stopId);
  const chat = await c.chat.completions.create({ model: 'model', messages: user, stop: 'said' });
  assert.equal(chat.choices[0].stop_reason, 'said');
  const chunks = parseSse((await post(s.base, '/v1/chat/completions',
    { messages: user, stop_token_ids: [stopId], stream: true })).text);
  const last = chunks.filter((x) => x !== '[DONE]' && x.choices[0]?.finish_reason).at(-1);
  assert.equal(last.choices[0].stop_reason, stopId);
  const cchunks = parseSse((await post(s.base, '/v1/completions',
    { prompt: 'Hi', stop: 'machine', stream: true, max_tokens: 100 })).text);
  assert.equal(cchunks.filter((x) => x !== '[DONE]' && x.choices[0]?.finish_reason).at(-1).choices[0].stop_reason,
    'machine');
});

test('stop_token_ids: the stop token\'s text is kept with include_stop_str_in_output (vLLM)', async () => {
  const s = await server('text', TEXT);
  const ids = (await post(s.base, '/tokenize', { prompt: TEXT, add_special_tokens: false })).json.tokens;
  const upTo = (await post(s.base, '/detokenize', { tokens: ids.slice(0, 4) })).json.prompt;
  const before = (await post(s.base, '/detokenize', { tokens: ids.slice(0, 3) })).json.prompt;
  let r = await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 100, stop_token_ids: [ids[3]],
    include_stop_str_in_output: true });
  assert.equal(r.json.choices[0].text, upTo);
  r = await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 100, stop_token_ids: [ids[3]] });
  assert.equal(r.json.choices[0].text, before);
});

test('usage: prompt_tokens_details.cached_tokens is reported', async () => {
  const s = await server('text', TEXT);
  const r = await s.client().chat.completions.create({ model: 'model', messages: user, max_tokens: 2 });
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  const c = await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 2 });
  assert.equal(c.usage.prompt_tokens_details.cached_tokens, 0);
});

test('models.retrieve: the served model, 404 for another', async () => {
  const s = await server('text', TEXT);
  const m = await s.client().models.retrieve('model');
  assert.equal(m.id, 'model');
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'moeserve');
  await assert.rejects(s.client().models.retrieve('other'), (e) => e.status === 404);
  const head = await fetch(s.base + '/v1/models/model', { method: 'HEAD' });
  assert.equal(head.status, 200);
});

test('priority: 0 is accepted, anything else refused (no priority scheduler)', async () => {
  const s = await server('text', TEXT);
  for (const route of ['/v1/completions', '/v1/chat/completions']) {
    const body = { prompt: 'Hi', messages: user, max_tokens: 1 };
    assert.equal((await post(s.base, route, { ...body, priority: 0 })).status, 200);
    const r = await post(s.base, route, { ...body, priority: 5 });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.param, 'priority');
    assert.match(r.json.error.message, /priority scheduling/i);
  }
});

test('prompt_logprobs: one entry per prompt token, the first null (both endpoints); refused when streaming', async () => {
  const s = await server('text', TEXT);
  const c = await post(s.base, '/v1/completions', { prompt: 'Hi there', max_tokens: 1, prompt_logprobs: 1 });
  assert.equal(c.status, 200, c.text);
  const plp = c.json.choices[0].prompt_logprobs;
  assert.equal(plp.length, c.json.usage.prompt_tokens);
  assert.equal(plp[0], null);
  const ids = (await post(s.base, '/tokenize', { prompt: 'Hi there' })).json.tokens;
  for (let i = 1; i < plp.length; ++i) {
    const entry = plp[i][String(ids[i])];
    assert.ok(entry, `entry ${i} holds the prompt token ${ids[i]}`);
    assert.equal(typeof entry.logprob, 'number');
    assert.equal(typeof entry.decoded_token, 'string');
  }
  const chat = await post(s.base, '/v1/chat/completions', { messages: user, max_tokens: 1, prompt_logprobs: 0 });
  assert.equal(chat.status, 200, chat.text);
  assert.equal(chat.json.prompt_logprobs.length, chat.json.usage.prompt_tokens);
  assert.equal(chat.json.prompt_logprobs[0], null);
  const streamed = await post(s.base, '/v1/completions', { prompt: 'Hi', prompt_logprobs: 1, stream: true });
  assert.equal(streamed.status, 400);
  assert.equal(streamed.json.error.param, 'prompt_logprobs');
  const bad = await post(s.base, '/v1/completions', { prompt: 'Hi', prompt_logprobs: 21 });
  assert.equal(bad.status, 400);
});

test('chat echo: the final assistant message is prepended (whole and streamed)', async () => {
  const s = await server('text', TEXT);
  const messages = [...user, { role: 'assistant', content: 'Prefix: ' }];
  const body = { messages, echo: true, continue_final_message: true, add_generation_prompt: false, max_tokens: 2 };
  const r = await post(s.base, '/v1/chat/completions', body);
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.choices[0].message.content.startsWith('Prefix: '), r.json.choices[0].message.content);
  const chunks = parseSse((await post(s.base, '/v1/chat/completions', { ...body, stream: true })).text);
  const content = chunks.filter((x) => x !== '[DONE]').map((x) => x.choices[0]?.delta?.content ?? '').join('');
  assert.equal(content, r.json.choices[0].message.content);
  const noEcho = await post(s.base, '/v1/chat/completions', { messages: user, echo: true, max_tokens: 2 });
  assert.ok(!noEcho.json.choices[0].message.content.startsWith('What is'), 'a user turn is not echoed');
});

test('truncate_prompt_tokens keeps the last k prompt tokens (completions and chat)', async () => {
  const s = await server('text', TEXT);
  const r = await post(s.base, '/v1/completions', { prompt: 'one two three four five six', max_tokens: 1,
    truncate_prompt_tokens: 3 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.usage.prompt_tokens, 3);
  const chat = await post(s.base, '/v1/chat/completions', { messages: user, max_tokens: 1, truncate_prompt_tokens: 4 });
  assert.equal(chat.json.usage.prompt_tokens, 4);
  const big = await post(s.base, '/v1/completions', { prompt: 'Hi', truncate_prompt_tokens: 100000 });
  assert.equal(big.status, 400);
  assert.equal(big.json.error.param, 'truncate_prompt_tokens');
});

test('allowed_token_ids and bad_words: checked (ids in the vocabulary, single-token words)', async () => {
  const s = await server('text', TEXT);
  let r = await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 1, allowed_token_ids: [5, 6] });
  assert.equal(r.status, 200, r.text);
  r = await post(s.base, '/v1/completions', { prompt: 'Hi', allowed_token_ids: [10 ** 9] });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'allowed_token_ids');
  r = await post(s.base, '/v1/completions', { prompt: 'Hi', allowed_token_ids: [] });
  assert.equal(r.status, 400);
  r = await post(s.base, '/v1/chat/completions', { messages: user, max_tokens: 1, bad_words: ['The'] });
  assert.equal(r.status, 200, r.text);
  r = await post(s.base, '/v1/chat/completions', { messages: user, bad_words: ['antidisestablishmentarianism'] });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'bad_words');
});

test('fields accepted but not used are named in one warning line per request', async () => {
  const s = await startServer(['--scripted-output', writeTemp('reply.txt', TEXT)]);
  try {
    const r = await post(s.base, '/v1/chat/completions', { messages: user, max_tokens: 1, user: 'u1',
      service_tier: 'auto', frobnicate: 3, temperature: 0.5 });
    assert.equal(r.status, 200);
    await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 1, length_penalty: 1.5 });
    await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 1 });
    await sleep(100);
    const lines = s.log().split('\n').filter((l) => l.includes('ignored'));
    assert.equal(lines.length, 2, lines.join('\n'));
    assert.match(lines[0], /chat\/completions/);
    for (const f of ['user', 'service_tier', 'frobnicate']) assert.ok(lines[0].includes(f), lines[0]);
    assert.ok(!lines[0].includes('temperature'));
    assert.ok(lines[1].includes('length_penalty'));
  } finally {
    await s.stop();
  }
});

await run(async () => { for (const s of Object.values(servers)) await s.stop(); });
