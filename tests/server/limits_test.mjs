// Work limits (issue 14): a small request must not buy a large share of the server. Each limit
// answers 400 with an OpenAI error body that names the limit's flag, before the work is done;
// template inputs cannot replace what the server validated; the API key guards every route but
// the probes; memory that large requests used comes back. Runs against the scripted engine.
import assert from 'node:assert/strict';
import { startServer, test, run, writeTemp, post, rssKb, sleep } from './harness.mjs';

const KEY = 'sk-limits-1';
const auth = { authorization: `Bearer ${KEY}` };
const s = await startServer(['--scripted-output', writeTemp('r.txt', 'Fine, thanks.'), '--api-key', KEY,
  '--max-model-len', '1024']);
const chat = [{ role: 'user', content: 'Hi' }];

function isLimit(r, flag, param) {
  assert.equal(r.status, 400, r.text.slice(0, 500));
  const e = r.json.error;
  assert.equal(e.type, 'invalid_request_error');
  assert.equal(e.param, param);
  assert.ok(e.message.includes(`--${flag}`), e.message);
}

async function stillServes(server = s, headers = auth) {
  const r = await post(server.base, '/v1/completions', { prompt: 'Hi', max_tokens: 2 }, headers);
  assert.equal(r.status, 200, r.text);
}

test('400 prompts x n = 51,200 sequences from a 2 KB body -> 400 naming --max-sequences-per-request', async () => {
  const body = { prompt: Array(400).fill('a'), n: 128, max_tokens: 1 };
  assert.ok(JSON.stringify(body).length < 2500);
  isLimit(await post(s.base, '/v1/completions', body, auth), 'max-sequences-per-request', 'prompt');
  // Within the limit: 2 prompts x 128 = 256 sequences run.
  const ok = await post(s.base, '/v1/completions', { prompt: ['a', 'b'], n: 128, max_tokens: 1 }, auth);
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.choices.length, 256);
  await stillServes();
});

test('10^6 empty messages -> 400 naming --max-messages-per-request', async () => {
  const body = `{"messages": [${Array(1e6).fill('{"role":"user","content":""}').join(',')}]}`;
  isLimit(await post(s.base, '/v1/chat/completions', body, auth), 'max-messages-per-request', 'messages');
  isLimit(await post(s.base, '/tokenize', body, auth), 'max-messages-per-request', 'messages');
  await stillServes();
});

test('the message count is checked before the template renders', async () => {
  // This template fails as soon as it renders: a limit error proves rendering never started.
  const t = await startServer(['--scripted-output', writeTemp('r.txt', 'x'), '--max-messages-per-request', '10',
    '--chat-template', writeTemp('t.jinja', "{{ raise_exception('rendered') }}")]);
  try {
    const msgs = (k) => Array(k).fill({ role: 'user', content: '' });
    isLimit(await post(t.base, '/v1/chat/completions', { messages: msgs(11) }), 'max-messages-per-request', 'messages');
    const r = await post(t.base, '/v1/chat/completions', { messages: msgs(10) });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /rendered/);
  } finally { await t.stop(); }
});

test('a prompt far longer than max_model_len is refused without tokenizing it', async () => {
  const r = await post(s.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'a b '.repeat(1e6) }] }, auth);
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /maximum context length is 1024 tokens.*bytes/);
  const c = await post(s.base, '/v1/completions', { prompt: 'a b '.repeat(1e6) }, auth);
  assert.equal(c.status, 400);
  assert.match(c.json.error.message, /maximum context length is 1024 tokens.*bytes/);
});

test('10^6 stop strings -> 400 naming --max-stop-strings; too many stop bytes -> --max-stop-bytes', async () => {
  const many = { prompt: 'Hi', max_tokens: 2, stop: Array(1e6).fill('x') };
  isLimit(await post(s.base, '/v1/completions', many, auth), 'max-stop-strings', 'stop');
  isLimit(await post(s.base, '/v1/chat/completions', { messages: chat, stop: Array(65).fill('x') }, auth),
    'max-stop-strings', 'stop');
  isLimit(await post(s.base, '/v1/completions', { prompt: 'Hi', stop: ['y'.repeat(10000), 'z'.repeat(10000)] }, auth),
    'max-stop-bytes', 'stop');
  // 64 stop strings are fine, and they still stop the text.
  const r = await post(s.base, '/v1/completions',
    { prompt: 'Hi', max_tokens: 20, stop: [...Array(63).fill('qqq'), 'thanks'] }, auth);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.choices[0].text, 'Fine, ');
  assert.equal(r.json.choices[0].finish_reason, 'stop');
});

test('an empty stop string -> 400 (as vLLM)', async () => {
  for (const stop of ['', ['a', '']]) {
    const r = await post(s.base, '/v1/completions', { prompt: 'Hi', stop }, auth);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'stop');
    const c = await post(s.base, '/v1/chat/completions', { messages: chat, stop }, auth);
    assert.equal(c.status, 400, c.text);
  }
});

test('tools over the count or byte limit -> 400 naming the flag', async () => {
  const tool = (i, extra = '') => ({ type: 'function', function: { name: `f${i}`, description: extra, parameters: { type: 'object' } } });
  isLimit(await post(s.base, '/v1/chat/completions', { messages: chat, tools: Array.from({ length: 129 }, (_, i) => tool(i)) }, auth),
    'max-tools', 'tools');
  isLimit(await post(s.base, '/v1/chat/completions', { messages: chat, tools: [tool(0, 'd'.repeat(1.1e6))] }, auth),
    'max-tools-bytes', 'tools');
  const ok = await post(s.base, '/v1/chat/completions', { messages: chat, tools: [tool(0)], max_tokens: 2 }, auth);
  assert.equal(ok.status, 200, ok.text);
});

test('chat_template_kwargs cannot replace what the server renders -> 400', async () => {
  const reserved = {
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }],
    tools: [1, 2], documents: [{ text: 'd' }], add_generation_prompt: false, continue_final_message: true,
    bos_token: '<evil>', eos_token: '<evil>', raise_exception: 1,
  };
  for (const [k, v] of Object.entries(reserved)) {
    const r = await post(s.base, '/v1/chat/completions', { messages: chat, chat_template_kwargs: { [k]: v } }, auth);
    assert.equal(r.status, 400, `${k}: ${r.text}`);
    assert.equal(r.json.error.param, 'chat_template_kwargs');
    assert.ok(r.json.error.message.includes(k), r.json.error.message);
  }
  const ok = await post(s.base, '/v1/chat/completions',
    { messages: chat, chat_template_kwargs: { enable_thinking: false }, max_tokens: 2 }, auth);
  assert.equal(ok.status, 200, ok.text);
});

test('--api-key guards /tokenize and /detokenize too; /health, /metrics, /version stay open', async () => {
  for (const [route, body] of [['/tokenize', { prompt: 'Hi' }], ['/detokenize', { tokens: [1, 2] }]]) {
    const none = await post(s.base, route, body);
    assert.equal(none.status, 401, route);
    assert.equal(none.json.error.code, 'invalid_api_key');
    assert.equal((await post(s.base, route, body, { authorization: 'Bearer sk-limits-2' })).status, 401, route);
    assert.equal((await post(s.base, route, body, { authorization: `Bearer ${KEY}x` })).status, 401, route);
    assert.equal((await post(s.base, route, body, auth)).status, 200, route);
  }
  for (const route of ['/health', '/metrics', '/version']) assert.equal((await fetch(s.base + route)).status, 200, route);
  assert.equal((await fetch(s.base + '/v1/models')).status, 401);
});

// RSS: a generous functional bound (timings are never checked). Concurrent 5 MB requests, each
// on a new connection, used to leave their parse peaks resident in per-thread malloc arenas.
test('RSS comes back after bursts of large requests', async () => {
  const t = await startServer(['--scripted-output', writeTemp('r.txt', 'x'), '--max-model-len', '256']);
  try {
    const big = JSON.stringify({ messages: Array.from({ length: 2000 }, () => ({ role: 'user', content: 'word '.repeat(500) })) });
    assert.ok(big.length > 5e6);
    await post(t.base, '/v1/chat/completions', big, { connection: 'close' });
    await sleep(200);
    const idle = rssKb(t.proc.pid);
    const peaks = [];
    for (let round = 0; round < 3; ++round) {
      const rs = await Promise.all(Array.from({ length: 8 }, () =>
        post(t.base, '/v1/chat/completions', big, { connection: 'close' })));
      for (const r of rs) assert.equal(r.status, 400);  // longer than max_model_len: refused after rendering
      await sleep(200);
      peaks.push(rssKb(t.proc.pid));
    }
    console.log(`  RSS idle ${idle} kB, after each burst of 8 x 5 MB: ${peaks.join(', ')} kB`);
    assert.ok(peaks[2] < idle + 64 * 1024, `RSS ${peaks[2]} kB vs ${idle} kB idle`);
    await stillServes(t, {});
  } finally { await t.stop(); }
});

await run(async () => { await s.stop(); });
