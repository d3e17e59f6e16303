// End-to-end tests on a real (tiny, random) MiniMax-M2 checkpoint: the server's greedy tokens equal
// `moeserve generate` and the PyTorch reference; sampling controls (seed, top_k, n, stop, logprobs,
// echo) behave; 64 concurrent requests with random cancellations give the same answers as alone,
// leave no KV block in use and do not grow RSS on a second identical round.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { startServer, test, run, post, metricValue, rssKb, sleep, BIN, MODEL } from './harness.mjs';

const s = await startServer(['--kv-cache-memory', String(16 << 20), '--max-model-len', '512',
  '--threads', '1', '--max-num-seqs', '64']);
const client = s.client();
const PROMPT = [600, 5, 17, 99, 230, 411];
const SOURCE = process.env.MOESERVE_SOURCE_DIR;
const greedy = { temperature: 0, ignore_eos: true };
// The subprocesses run asynchronously: a blocked event loop would keep the client's pooled
// connection past the server's keep-alive close and send the next request on a dead socket.
const execFileText = async (file, args) =>
  (await promisify(execFile)(file, args, { maxBuffer: 64 << 20 })).stdout;
const ids = (choice) => choice.logprobs.tokens.map((t) => Number(t.slice('token_id:'.length)));

async function completionIds(prompt, maxTokens, extra = {}) {
  const r = await client.completions.create({ model: 'model', prompt, max_tokens: maxTokens, logprobs: 0,
    return_tokens_as_token_ids: true, ...greedy, ...extra });
  return ids(r.choices[0]);
}

test('greedy tokens == moeserve generate == PyTorch reference', async () => {
  const N = 12;
  const server = await completionIds(PROMPT, N);
  const gen = JSON.parse(await execFileText(BIN, ['generate', '--model', MODEL, '--prompt-ids',
    PROMPT.join(','), '--max-tokens', String(N), '--ignore-eos', '--output-format', 'json',
    '--threads', '1']));
  assert.deepEqual(server, gen.token_ids);
  const ref = JSON.parse(await execFileText('/usr/bin/python3', [path.join(SOURCE, 'tools/reference.py'),
    '--model', MODEL, '--prompt-ids', PROMPT.join(','), '--max-tokens', String(N), '--json']));
  assert.deepEqual(server, ref.token_ids[0]);
});

test('streamed == non-streamed (completions and chat, greedy)', async () => {
  const body = { model: 'model', prompt: 'Natalia sold clips', max_tokens: 20, ...greedy };
  const full = await client.completions.create(body);
  let text = '';
  for await (const ch of await client.completions.create({ ...body, stream: true })) text += ch.choices[0].text;
  assert.equal(text, full.choices[0].text);
  const cbody = { model: 'model', messages: [{ role: 'user', content: 'How many clips?' }], max_tokens: 20,
    ...greedy, chat_template_kwargs: { enable_thinking: true } };
  const c = await client.chat.completions.create(cbody);
  let reasoning = '', content = '', finish = null;
  for await (const ch of await client.chat.completions.create({ ...cbody, stream: true })) {
    const d = ch.choices[0]?.delta ?? {};
    reasoning += d.reasoning_content ?? '';
    content += d.content ?? '';
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(reasoning, c.choices[0].message.reasoning_content ?? '');
  assert.equal(content, c.choices[0].message.content ?? '');
  assert.equal(finish, c.choices[0].finish_reason);
  assert.equal(c.usage.completion_tokens, 20);
});

test('stop strings on model output (also split across tokens, streamed)', async () => {
  const body = { model: 'model', prompt: 'Natalia sold clips', max_tokens: 40, ...greedy };
  const full = (await client.completions.create(body)).choices[0].text;
  // Stop strings taken from the middle of the text: most cross token boundaries.
  for (const [a, b] of [[10, 14], [20, 23], [5, 6]]) {
    const stop = [...full].slice(a, b).join('');
    if (!stop) continue;
    const want = full.slice(0, full.indexOf(stop));
    const r = await client.completions.create({ ...body, stop });
    assert.equal(r.choices[0].text, want);
    assert.equal(r.choices[0].finish_reason, 'stop');
    let text = '';
    for await (const ch of await client.completions.create({ ...body, stop, stream: true })) {
      text += ch.choices[0].text;
      assert.ok(want.startsWith(text), 'nothing past the stop string is streamed');
    }
    assert.equal(text, want);
  }
});

test('top_k 1 == greedy; same seed same output; n > 1', async () => {
  const g = await completionIds(PROMPT, 16);
  assert.deepEqual(await completionIds(PROMPT, 16, { temperature: 1.0, top_k: 1 }), g);
  const body = { model: 'model', prompt: PROMPT, max_tokens: 16, temperature: 1.0, seed: 1234, n: 3, ignore_eos: true };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(new Set(a.choices.map((c) => c.text)).size, 3, 'the n samples differ');
  const c = await client.completions.create({ ...body, seed: 99 });
  assert.notDeepEqual(c.choices.map((x) => x.text), a.choices.map((x) => x.text));
});

test('same seed same output under concurrent load', async () => {
  const seeded = { model: 'model', prompt: PROMPT, max_tokens: 24, temperature: 0.9, seed: 7, ignore_eos: true };
  const alone = (await client.completions.create(seeded)).choices[0].text;
  const jobs = [];
  for (let i = 0; i < 12; ++i) {
    jobs.push(client.completions.create(i % 2 ? seeded : { ...seeded, seed: undefined, prompt: [600, i + 3, 44] }));
  }
  const res = await Promise.all(jobs);
  for (let i = 1; i < 12; i += 2) assert.equal(res[i].choices[0].text, alone);
});

test('logprobs (completions and chat) and echo with prompt logprobs', async () => {
  // Token ids as keys: distinct byte tokens can decode to the same text (U+FFFD) and share a key.
  const r = await client.completions.create({ model: 'model', prompt: PROMPT, max_tokens: 8, logprobs: 3,
    return_tokens_as_token_ids: true, ...greedy });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8);
  lp.token_logprobs.forEach((v, i) => {
    assert.ok(v <= 0);
    const tops = Object.values(lp.top_logprobs[i]);
    assert.ok(tops.length >= 3 && tops.length <= 4);
    assert.ok(v >= Math.max(...tops) - 1e-5, 'greedy picks the most likely token');
  });
  const e = await client.completions.create({ model: 'model', prompt: PROMPT, max_tokens: 4, logprobs: 2, echo: true,
    return_tokens_as_token_ids: true, ...greedy });
  const el = e.choices[0].logprobs;
  assert.equal(el.tokens.length, PROMPT.length + 4);
  assert.deepEqual(ids(e.choices[0]).slice(0, PROMPT.length), PROMPT);
  assert.equal(el.token_logprobs[0], null);
  for (let i = 1; i < el.tokens.length; ++i) assert.ok(el.token_logprobs[i] <= 0);
  const c = await client.chat.completions.create({ model: 'model', messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 5, logprobs: true, top_logprobs: 2, ...greedy });
  const content = c.choices[0].logprobs.content;
  assert.equal(content.length, 5);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.logprob >= t.top_logprobs[0].logprob - 1e-5);
  }
});

test('vLLM extras on model output: cached_tokens, allowed_token_ids, bad_words, prompt_logprobs', async () => {
  // A prompt no other test sends: the first request computes it, the second finds its full
  // blocks in the prefix cache.
  const prompt = [600];
  for (let k = 0; k < 40; ++k) prompt.push((k * 29 + 11) % 500 + 50);
  const first = await client.completions.create({ model: 'model', prompt, max_tokens: 2, ...greedy });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const second = await client.completions.create({ model: 'model', prompt, max_tokens: 2, ...greedy });
  const cached = second.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0 && cached < prompt.length, `cached ${cached} of ${prompt.length}`);
  const chat = { model: 'model', messages: [{ role: 'user', content: 'Tell me about clips, please.' }], max_tokens: 2 };
  await client.chat.completions.create(chat);
  assert.ok((await client.chat.completions.create(chat)).usage.prompt_tokens_details.cached_tokens > 0);

  const allowed = [311, 281, 12];
  const a = await completionIds(PROMPT, 12, { allowed_token_ids: allowed });
  for (const t of a) assert.ok(allowed.includes(t), `token ${t} is not allowed`);
  // 'The' is one token (311) in the test tokenizer: banning it leaves the other two.
  const b = await completionIds(PROMPT, 12, { allowed_token_ids: allowed, bad_words: ['The'] });
  for (const t of b) assert.ok(t === 281 || t === 12, `token ${t} is banned or not allowed`);

  // prompt_logprobs agree with echo's prompt logprobs.
  const r = await post(s.base, '/v1/completions', { prompt: PROMPT, max_tokens: 1, prompt_logprobs: 2, echo: true,
    logprobs: 2, return_tokens_as_token_ids: true, ...greedy });
  const plp = r.json.choices[0].prompt_logprobs;
  const echoed = r.json.choices[0].logprobs.token_logprobs;
  assert.equal(plp.length, PROMPT.length);
  assert.equal(plp[0], null);
  for (let i = 1; i < PROMPT.length; ++i) {
    const entry = plp[i][String(PROMPT[i])];
    assert.ok(Math.abs(entry.logprob - echoed[i]) < 1e-6);
    const ranks = Object.values(plp[i]).map((e) => e.rank).filter((x) => x !== null);
    assert.ok(ranks.includes(1) && ranks.includes(2));
  }
});

test('Anthropic Messages and Responses APIs give the chat completion\'s greedy reply', async () => {
  const question = 'How many clips did Natalia sell?';
  const chat = await client.chat.completions.create({ model: 'model', messages: [{ role: 'user', content: question }],
    max_tokens: 16, temperature: 0 });
  const want = chat.choices[0].message;
  const m = await post(s.base, '/v1/messages', { model: 'model', max_tokens: 16, temperature: 0,
    messages: [{ role: 'user', content: question }] });
  assert.equal(m.status, 200, m.text);
  const blockText = (type, field) => m.json.content.filter((b) => b.type === type).map((b) => b[field]).join('');
  assert.equal(blockText('thinking', 'thinking'), want.reasoning_content ?? '');
  assert.equal(blockText('text', 'text'), want.content ?? '');
  assert.equal(m.json.usage.output_tokens, chat.usage.completion_tokens);
  const r = await client.responses.create({ model: 'model', input: question, max_output_tokens: 16, temperature: 0 });
  const reasoning = r.output.filter((o) => o.type === 'reasoning').map((o) => o.content[0].text).join('');
  assert.equal(reasoning, want.reasoning_content ?? '');
  assert.equal(r.output_text, want.content ?? '');
  assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
});

// 64 concurrent requests, mixed prompt and output lengths, a third cancelled at random moments.
async function loadRound(cases, expected, seed) {
  let rng = seed;
  const rand = () => (rng = (rng * 1103515245 + 12345) % 2147483648) / 2147483648;
  const jobs = cases.map(async (c, i) => {
    const cancel = rand() < 0.33;
    const stream = rand() < 0.5;
    const ac = new AbortController();
    if (cancel) setTimeout(() => ac.abort(), Math.floor(rand() * 300));
    try {
      const body = { model: 'model', prompt: c.prompt, max_tokens: c.maxTokens, ...greedy };
      let text = '';
      if (stream) {
        for await (const ch of await client.completions.create({ ...body, stream: true }, { signal: ac.signal }))
          text += ch.choices[0]?.text ?? '';
      } else {
        text = (await client.completions.create(body, { signal: ac.signal })).choices[0].text;
      }
      // A cancelled stream may end quietly with what it had so far.
      if (cancel) assert.ok(expected[i].startsWith(text), `cancelled request ${i}: not a prefix`);
      else assert.equal(text, expected[i], `request ${i} differs from its single-request answer`);
    } catch (e) {
      if (!cancel || !(e.name === 'AbortError' || /abort/i.test(String(e)))) throw e;
    }
  });
  await Promise.all(jobs);
  for (let i = 0; i < 100; ++i) {
    const m = await (await fetch(s.base + '/metrics')).text();
    if (metricValue(m, 'moeserve:kv_cache_blocks_used') === 0 && metricValue(m, 'moeserve:num_requests_running') === 0) return;
    await sleep(50);
  }
  const m = await (await fetch(s.base + '/metrics')).text();
  assert.equal(metricValue(m, 'moeserve:kv_cache_blocks_used'), 0, 'KV blocks in use after the round');
  assert.equal(metricValue(m, 'moeserve:num_requests_running'), 0);
}

test('64 concurrent requests with cancellations: answers == alone, KV freed, RSS stable', async () => {
  const cases = [];
  for (let i = 0; i < 64; ++i) {
    const len = 3 + (i * 7) % 40;
    const prompt = [600];
    for (let k = 0; k < len; ++k) prompt.push((i * 31 + k * 17) % 590 + 3);
    cases.push({ prompt, maxTokens: 4 + (i * 13) % 37 });
  }
  const expected = [];
  for (const c of cases) {
    expected.push((await client.completions.create({ model: 'model', prompt: c.prompt, max_tokens: c.maxTokens, ...greedy })).choices[0].text);
  }
  await loadRound(cases, expected, 1);
  const rss1 = rssKb(s.proc.pid);
  await loadRound(cases, expected, 1);
  const rss2 = rssKb(s.proc.pid);
  assert.ok(rss2 <= rss1 * 1.05 + 4096, `RSS grew from ${rss1} kB to ${rss2} kB`);
});

await run(async () => { await s.stop(); });
