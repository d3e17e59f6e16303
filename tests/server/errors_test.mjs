// Bad input of every kind gets an OpenAI-style error body with the right 4xx status, and the
// server keeps serving afterwards. Runs against the scripted engine with an API key.
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, test, run, writeTemp, post } from './harness.mjs';

const KEY = 'sk-test-123';
const s = await startServer(['--scripted-output', writeTemp('r.txt', 'Fine, thanks.'), '--api-key', KEY,
  '--max-model-len', '256', '--max-request-bytes', '100000']);
const auth = { authorization: `Bearer ${KEY}` };
const chat = [{ role: 'user', content: 'Hi' }];

function isError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, 'error body: ' + r.text);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e);
  if (param !== undefined) assert.equal(e.param, param);
}

async function expectBad(route, body, param, status = 400) {
  isError(await post(s.base, route, body, auth), status, param);
}

test('auth: missing or wrong key -> 401 on /v1/*, /health and /metrics stay open', async () => {
  isError(await post(s.base, '/v1/completions', { prompt: 'Hi' }), 401);
  isError(await post(s.base, '/v1/completions', { prompt: 'Hi' }, { authorization: 'Bearer nope' }), 401);
  await assert.rejects(s.client({ apiKey: 'wrong' }).models.list(), (e) => e.status === 401);
  assert.ok((await s.client({ apiKey: KEY }).models.list()).data.some((m) => m.id === 'model'));
  assert.equal((await fetch(s.base + '/health')).status, 200);
  assert.equal((await fetch(s.base + '/metrics')).status, 200);
});

test('env MOESERVE_API_KEY sets the key', async () => {
  const t = await startServer(['--scripted-output', writeTemp('r.txt', 'x')], { env: { MOESERVE_API_KEY: 'envkey' } });
  try {
    isError(await post(t.base, '/v1/completions', { prompt: 'Hi' }), 401);
    assert.equal((await post(t.base, '/v1/completions', { prompt: 'Hi', max_tokens: 1 }, { authorization: 'Bearer envkey' })).status, 200);
  } finally { await t.stop(); }
});

test('unknown model -> 404 model_not_found', async () => {
  const r = await post(s.base, '/v1/completions', { model: 'gpt-4', prompt: 'Hi' }, auth);
  isError(r, 404, 'model');
  assert.equal(r.json.error.code, 'model_not_found');
  await assert.rejects(s.client({ apiKey: KEY }).chat.completions.create({ model: 'other', messages: chat }),
    (e) => e.status === 404);
});

test('malformed JSON, non-object body, invalid UTF-8 -> 400', async () => {
  await expectBad('/v1/completions', '{"prompt": "Hi",');
  await expectBad('/v1/completions', '[1, 2]');
  await expectBad('/v1/chat/completions', 'not json');
  const bad = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  const res = await fetch(s.base + '/v1/completions', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: bad });
  assert.equal(res.status, 400);
  assert.ok((await res.json()).error.message.length > 0);
});

test('wrong field types -> 400 naming the field', async () => {
  const cases = [
    [{ prompt: 'Hi', temperature: 'hot' }, 'temperature'], [{ prompt: 'Hi', max_tokens: '5' }, 'max_tokens'],
    [{ prompt: 'Hi', n: 1.5 }, 'n'], [{ prompt: 'Hi', stream: 'yes' }, 'stream'], [{ prompt: 'Hi', stop: 5 }, 'stop'],
    [{ prompt: 'Hi', stop: ['a', 1] }, 'stop'], [{ prompt: 'Hi', logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ prompt: 'Hi', logit_bias: [1] }, 'logit_bias'], [{ prompt: 'Hi', seed: 'x' }, 'seed'],
    [{ prompt: 'Hi', top_p: 0 }, 'top_p'], [{ prompt: 'Hi', top_k: -5 }, 'top_k'],
    [{ prompt: 'Hi', presence_penalty: 3 }, 'presence_penalty'], [{ prompt: 'Hi', temperature: -1 }, 'temperature'],
    [{ prompt: 'Hi', stop_token_ids: [1, 'a'] }, 'stop_token_ids'], [{ prompt: 'Hi', stream_options: 3 }, 'stream_options'],
    [{ prompt: 123 }, 'prompt'], [{ prompt: [1, 'a'] }, 'prompt'], [{ prompt: [[1], 'a'] }, 'prompt'],
    [{ prompt: 'Hi', logit_bias: { 999999: 1 } }, 'logit_bias'],
  ];
  for (const [body, param] of cases) await expectBad('/v1/completions', body, param);
  await expectBad('/v1/chat/completions', { messages: 'hello' }, 'messages');
  await expectBad('/v1/chat/completions', { messages: [{ content: 'no role' }] }, 'messages');
  await expectBad('/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }, 'messages');
  await expectBad('/v1/chat/completions', { messages: chat, logprobs: 'yes' }, 'logprobs');
  await expectBad('/v1/chat/completions', { messages: chat, tools: {} }, 'tools');
  await expectBad('/v1/chat/completions', { messages: chat, chat_template_kwargs: [] }, 'chat_template_kwargs');
});

test('empty prompts and messages -> 400', async () => {
  await expectBad('/v1/completions', { prompt: '' }, 'prompt');
  await expectBad('/v1/completions', { prompt: [] }, 'prompt');
  await expectBad('/v1/completions', { prompt: [[]] }, 'prompt');
  await expectBad('/v1/completions', {}, 'prompt');
  await expectBad('/v1/chat/completions', { messages: [] }, 'messages');
  await expectBad('/v1/chat/completions', {}, 'messages');
});

test('prompt longer than max-model-len, max_tokens <= 0 or too large -> 400', async () => {
  await expectBad('/v1/completions', { prompt: Array(300).fill(5) });
  await expectBad('/v1/completions', { prompt: 'word '.repeat(400) });
  await expectBad('/v1/chat/completions', { messages: [{ role: 'user', content: 'word '.repeat(400) }] }, 'messages');
  await expectBad('/v1/completions', { prompt: 'Hi', max_tokens: 0 }, 'max_tokens');
  await expectBad('/v1/completions', { prompt: 'Hi', max_tokens: -3 }, 'max_tokens');
  await expectBad('/v1/completions', { prompt: 'Hi', max_tokens: 100000 });
  await expectBad('/v1/chat/completions', { messages: chat, max_completion_tokens: 0 }, 'max_completion_tokens');
  await expectBad('/v1/completions', { prompt: [5, 99999] }, 'prompt');
});

test('n out of range, best_of != n, suffix, logprobs range -> 400', async () => {
  await expectBad('/v1/completions', { prompt: 'Hi', n: 0 }, 'n');
  await expectBad('/v1/completions', { prompt: 'Hi', n: 129 }, 'n');
  await expectBad('/v1/completions', { prompt: 'Hi', n: 2, best_of: 3 }, 'best_of');
  await expectBad('/v1/completions', { prompt: 'Hi', suffix: 'end' }, 'suffix');
  await expectBad('/v1/completions', { prompt: 'Hi', logprobs: 21 }, 'logprobs');
  await expectBad('/v1/chat/completions', { messages: chat, top_logprobs: 2 }, 'top_logprobs');
  await expectBad('/v1/chat/completions', { messages: chat, logprobs: true, top_logprobs: 50 }, 'top_logprobs');
});

test('body over the size limit -> 413', async () => {
  const r = await post(s.base, '/v1/completions', { prompt: 'x'.repeat(200000) }, auth);
  assert.equal(r.status, 413);
});

test('unknown route -> 404, wrong method -> 405', async () => {
  let r = await fetch(s.base + '/v1/nothing', { headers: auth });
  assert.equal(r.status, 404);
  assert.ok((await r.json()).error);
  r = await fetch(s.base + '/v1/completions', { headers: auth });
  assert.equal(r.status, 405);
  assert.ok((await r.json()).error);
  r = await fetch(s.base + '/health', { method: 'POST', body: '{}' });
  assert.equal(r.status, 405);
});

test('tokenize / detokenize bad input -> 400', async () => {
  isError(await post(s.base, '/tokenize', {}, auth), 400);
  isError(await post(s.base, '/detokenize', { tokens: ['a'] }, auth), 400);
  isError(await post(s.base, '/detokenize', { tokens: [123456789] }, auth), 400);
});

test('JSON nested 120,000 levels deep on every route and in every nested field -> 400, server alive', async () => {
  // Recursive copies of client JSON used to overflow the stack (SIGSEGV, every request lost).
  const t = await startServer(['--scripted-output', writeTemp('r.txt', 'Fine.')]);
  try {
    const deep = (n) => '['.repeat(n) + ']'.repeat(n);
    const d = deep(120000);
    const bodies = [
      ['/v1/completions', `{"prompt": "Hi", "logit_bias": ${d}}`],
      ['/v1/chat/completions', `{"messages": [{"role": "user", "content": ${d}}]}`],
      ['/v1/chat/completions', `{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"x": ${d}}}`],
      ['/v1/chat/completions', `{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": ${d}}}]}`],
      ['/tokenize', `{"messages": ${d}}`],
      ['/detokenize', `{"tokens": ${d}}`],
      ['/v1/completions', deep(129)],
    ];
    for (const [route, body] of bodies) {
      const r = await post(t.base, route, body);
      isError(r, 400);
      assert.match(r.json.error.message, /deeper than 128/);
    }
    // 128 levels are fine as far as nesting goes (the field is then rejected for its type).
    isError(await post(t.base, '/v1/completions', `{"prompt": "Hi", "stop": ${deep(127)}}`), 400, 'stop');
    // Deep JSON inside a string (tool-call arguments) is kept as the string, not parsed.
    const args = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: deep(120000) } }] };
    const r = await post(t.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }, args, { role: 'tool', tool_call_id: 'c1', content: 'ok' }] });
    assert.equal(r.status, 200, r.text);
    const c = await t.client().chat.completions.create({ model: 'model', messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(c.choices.length, 1);
    assert.equal((await fetch(t.base + '/health')).status, 200);
  } finally { await t.stop(); }
});

test('a client that disconnects mid-request does not disturb the server', async () => {
  await new Promise((resolve) => {
    const sock = net.connect(s.port, '127.0.0.1', () => {
      sock.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"prompt"');
      setTimeout(() => { sock.destroy(); resolve(); }, 50);
    });
  });
});

test('after all of that the server still answers', async () => {
  const r = await s.client({ apiKey: KEY }).completions.create({ model: 'model', prompt: 'Hi', max_tokens: 3 });
  const ids = (await post(s.base, '/tokenize', { prompt: 'Fine, thanks.', add_special_tokens: false }, auth)).json.tokens;
  assert.equal(r.choices[0].text, (await post(s.base, '/detokenize', { tokens: ids.slice(0, 3) }, auth)).json.prompt);
  const c = await s.client({ apiKey: KEY }).chat.completions.create({ model: 'model', messages: chat });
  assert.equal(c.choices[0].finish_reason, 'stop');
});

await run(async () => { await s.stop(); });
