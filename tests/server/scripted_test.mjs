// End-to-end API tests against `moeserve serve --scripted-output FILE`: every request replays the
// file's text, so reasoning, tool calls and stop strings can be checked field by field against
// OpenAI's response format, streamed and not, through the official `openai` client.
import assert from 'node:assert/strict';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { MODEL, startServer, test, run, writeTemp, post, parseSse, metricValue, sleep } from './harness.mjs';

const REASONING = 'Let me add two and two.\n</think>\n\nThe answer is 4.';
const TOOLS_REPLY = 'The user wants weather and time.\n</think>\n\n<minimax:tool_call>\n' +
  '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n' +
  '<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_time">\n' +
  '<parameter name="tz">CET</parameter>\n</invoke>\n</minimax:tool_call>';
const TEXT = 'Hello there! The answer is 42, said the machine.';
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'Current time',
    parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const servers = {};
async function server(name, text, extra = []) {
  if (!servers[name]) servers[name] = await startServer(['--scripted-output', writeTemp('reply.txt', text), ...extra]);
  return servers[name];
}
const user = [{ role: 'user', content: 'What is 2 + 2?' }];

function checkUsage(u) {
  assert.equal(typeof u.prompt_tokens, 'number');
  assert.equal(typeof u.completion_tokens, 'number');
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
}

// Streams a chat request through the client; returns {chunks, reasoning, content, calls, finish}.
async function streamChat(client, body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const out = { chunks: [], reasoning: '', content: '', calls: [], finish: null, usage: null };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      const d = c.delta;
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      if (d.content) out.content += d.content;
      for (const t of d.tool_calls ?? []) {
        if (t.id) {
          assert.equal(out.calls[t.index], undefined, 'a tool call starts once');
          assert.equal(t.type, 'function');
          out.calls[t.index] = { id: t.id, name: t.function.name, arguments: t.function.arguments ?? '' };
        } else {
          assert.ok(out.calls[t.index], 'arguments after the first delta of the call');
          assert.equal(t.function.name, undefined);
          out.calls[t.index].arguments += t.function.arguments;
        }
      }
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

test('chat: reasoning then answer (non-streamed), OpenAI fields', async () => {
  const s = await server('reasoning', REASONING);
  const r = await s.client().chat.completions.create({ model: 'model', messages: user });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.created, 'number');
  assert.equal(r.model, MODEL);  // vLLM's default name: the --model string as given
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(c.message.reasoning_content, 'Let me add two and two.');
  assert.equal(c.message.content, 'The answer is 4.');
  assert.equal(c.message.tool_calls, undefined);
  assert.equal(c.finish_reason, 'stop');
  assert.equal(c.logprobs, null);
  checkUsage(r.usage);
  const tok = await post(s.base, '/tokenize', { messages: user });
  assert.equal(r.usage.prompt_tokens, tok.json.count);
});

test('chat: reasoning then answer (streamed) equals non-streamed, role first, usage last', async () => {
  const s = await server('reasoning', REASONING);
  const o = await streamChat(s.client(), { model: 'model', messages: user, stream_options: { include_usage: true } });
  assert.equal(o.chunks[0].choices[0].delta.role, 'assistant');
  for (const ch of o.chunks) {
    assert.equal(ch.object, 'chat.completion.chunk');
    assert.match(ch.id, /^chatcmpl-/);
    for (const c of ch.choices) {
      const d = JSON.stringify(c.delta);
      assert.ok(!d.includes('think>') && !d.includes('</'), 'no tag in a delta: ' + d);
    }
  }
  assert.equal(o.reasoning, 'Let me add two and two.');
  assert.equal(o.content, 'The answer is 4.');
  assert.equal(o.finish, 'stop');
  const last = o.chunks.at(-1);
  assert.deepEqual(last.choices, []);
  checkUsage(last.usage);
});

test('chat: two tool calls after reasoning (non-streamed)', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const r = await s.client().chat.completions.create({ model: 'model', messages: user, tools: TOOLS });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.reasoning_content, 'The user wants weather and time.');
  assert.equal(c.message.tool_calls.length, 2);
  const [a, b] = c.message.tool_calls;
  assert.match(a.id, /^call_/);
  assert.notEqual(a.id, b.id);
  assert.equal(a.type, 'function');
  assert.equal(a.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(a.function.arguments), { city: 'Paris', days: 3 });
  assert.equal(a.function.arguments, '{"city": "Paris", "days": 3}');
  assert.equal(b.function.name, 'get_time');
  assert.deepEqual(JSON.parse(b.function.arguments), { tz: 'CET' });
});

test('chat: two tool calls after reasoning (streamed), each call starts once', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const o = await streamChat(s.client(), { model: 'model', messages: user, tools: TOOLS });
  assert.equal(o.finish, 'tool_calls');
  assert.equal(o.reasoning, 'The user wants weather and time.');
  assert.equal(o.content, '');
  assert.equal(o.calls.length, 2);
  assert.equal(o.calls[0].name, 'get_weather');
  assert.equal(o.calls[0].arguments, '{"city": "Paris", "days": 3}');
  assert.equal(o.calls[1].name, 'get_time');
  assert.deepEqual(JSON.parse(o.calls[1].arguments), { tz: 'CET' });
  for (const ch of o.chunks)
    for (const c of ch.choices) assert.ok(!JSON.stringify(c.delta).includes('minimax:tool_call'));
});

test('chat: tool_choice none renders tools but does not parse calls', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const r = await s.client().chat.completions.create({ model: 'model', messages: user, tools: TOOLS, tool_choice: 'none' });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.ok(r.choices[0].message.content.includes('<invoke name="get_weather">'));
  const withTools = await post(s.base, '/tokenize', { messages: user, tools: TOOLS });
  const without = await post(s.base, '/tokenize', { messages: user });
  assert.ok(withTools.json.count > without.json.count, 'tools are rendered in the prompt');
  assert.equal(r.usage.prompt_tokens, withTools.json.count);
});

test('chat: named tool_choice returns only that function (streamed and not)', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const body = { model: 'model', messages: user, tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'get_time' } } };
  const r = await s.client().chat.completions.create(body);
  assert.equal(r.choices[0].message.tool_calls.length, 1);
  assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_time');
  const o = await streamChat(s.client(), body);
  assert.equal(o.calls.length, 1);
  assert.equal(o.calls[0].name, 'get_time');
  assert.equal(o.finish, 'tool_calls');
});

test('chat: tool_choice errors (unknown function, no tools)', async () => {
  const s = await server('tools', TOOLS_REPLY);
  let r = await post(s.base, '/v1/chat/completions', { messages: user, tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'nope' } } });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'tool_choice');
  r = await post(s.base, '/v1/chat/completions', { messages: user, tool_choice: 'required' });
  assert.equal(r.status, 400);
  r = await post(s.base, '/v1/chat/completions', { messages: user, tool_choice: 'sometimes', tools: TOOLS });
  assert.equal(r.status, 400);
});

test('chat: history with assistant reasoning_content and tool_calls (string arguments) renders', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const messages = [...user,
    { role: 'assistant', content: '', reasoning_content: 'I need the weather.',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }];
  const tok = await post(s.base, '/tokenize', { messages, tools: TOOLS });
  assert.equal(tok.status, 200, tok.text);
  const text = (await post(s.base, '/detokenize', { tokens: tok.json.tokens })).json.prompt;
  assert.ok(text.includes('<parameter name="city">Paris</parameter>'), text);
  assert.ok(text.includes('sunny'));
  const r = await s.client().chat.completions.create({ model: 'model', messages, tools: TOOLS });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
});

test('chat: continue_final_message and chat_template_kwargs reach the template', async () => {
  const s = await server('reasoning', REASONING);
  const messages = [...user, { role: 'assistant', content: 'The answer' }];
  const r = await post(s.base, '/v1/chat/completions', { messages, continue_final_message: true,
    add_generation_prompt: false, max_tokens: 3 });
  assert.equal(r.status, 200, r.text);
  const both = await post(s.base, '/v1/chat/completions', { messages, continue_final_message: true,
    add_generation_prompt: true });
  assert.equal(both.status, 400);
});

test('completions: stop string split across tokens never leaks (streamed and not)', async () => {
  const s = await server('text', TEXT);
  const c = s.client();
  const full = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100 });
  assert.equal(full.choices[0].text, TEXT);
  assert.equal(full.choices[0].finish_reason, 'stop');
  for (const stop of ['answer is', '42', 'said the machine', 'e!']) {
    const want = TEXT.slice(0, TEXT.indexOf(stop));
    const r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stop });
    assert.equal(r.choices[0].text, want);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const stream = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stop: [stop, 'zzz'], stream: true });
    let text = '';
    let finish = null;
    for await (const ch of stream) {
      text += ch.choices[0].text;
      assert.ok(!text.includes(stop), `stop string leaked: ${text}`);
      assert.ok(want.startsWith(text), `streamed text ${JSON.stringify(text)} beyond the stop`);
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    assert.equal(text, want);
    assert.equal(finish, 'stop');
  }
  // A held-back prefix that never completes is released at the end.
  const r = await c.completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stop: 'machines' });
  assert.equal(r.choices[0].text, TEXT);
  const inc = await post(s.base, '/v1/completions', { prompt: 'Hi', stop: '42', include_stop_str_in_output: true });
  assert.equal(inc.json.choices[0].text, TEXT.slice(0, TEXT.indexOf('42') + 2));
});

test('completions: every generated token streams a chunk, held-back text as "" (as vLLM)', async () => {
  const s = await server('text', TEXT);
  // 'said the machines' never completes: from "said" on, the text is held back token by token.
  const stream = await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100,
    stop: 'said the machines', stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  const tokens = chunks.filter((ch) => ch.choices.length > 0);
  assert.equal(tokens.length, chunks.at(-1).usage.completion_tokens);
  assert.ok(tokens.some((ch) => ch.choices[0].text === '' && !ch.choices[0].finish_reason),
    'a token whose text is held back still streams, as ""');
  assert.equal(tokens.map((ch) => ch.choices[0].text).join(''), TEXT);
});

test('completions: max_tokens -> length; n x prompts -> indexed choices', async () => {
  const s = await server('text', TEXT);
  const r = await s.client().completions.create({ model: 'model', prompt: ['Hi', 'Bye'], n: 3, max_tokens: 2 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices.length, 6);
  r.choices.forEach((c, i) => { assert.equal(c.index, i); assert.equal(c.finish_reason, 'length'); });
  assert.equal(r.usage.completion_tokens, 12);
  const tok = (await post(s.base, '/tokenize', { prompt: 'Hi' })).json.count +
    (await post(s.base, '/tokenize', { prompt: 'Bye' })).json.count;
  assert.equal(r.usage.prompt_tokens, tok);
  const ids = await s.client().completions.create({ model: 'model', prompt: [[600, 5, 6], [600, 7]], max_tokens: 1 });
  assert.equal(ids.choices.length, 2);
  assert.equal(ids.usage.prompt_tokens, 5);
});

test('completions: logprobs, echo, streamed chunks', async () => {
  const s = await server('text', TEXT);
  const r = await s.client().completions.create({ model: 'model', prompt: 'Hi', logprobs: 1, echo: true, max_tokens: 5 });
  const c = r.choices[0];
  assert.ok(c.text.startsWith('Hi'));
  const lp = c.logprobs;
  assert.equal(lp.tokens.join(''), c.text);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  let off = 0;
  lp.tokens.forEach((t, i) => { assert.equal(lp.text_offset[i], off); off += t.length; });
  assert.equal(lp.tokens.length, r.usage.prompt_tokens + 5);
  const stream = await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 5, stream: true,
    stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.deepEqual(chunks.at(-1).choices, []);
  assert.equal(chunks.at(-1).usage.completion_tokens, 5);
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
  // Raw SSE framing ends with [DONE].
  const raw = await post(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 2, stream: true });
  assert.equal(raw.headers.get('content-type'), 'text/event-stream');
  assert.equal(parseSse(raw.text).at(-1), '[DONE]');
});

test('client disconnect aborts the request in the engine', async () => {
  const s = await server('slow', TEXT.repeat(20), ['--scripted-tick-ms', '20']);
  const before = await (await fetch(s.base + '/metrics')).text();
  const abortsBefore = metricValue(before, 'moeserve:request_success_total', 'abort');
  for (const stream of [true, false]) {
    const ac = new AbortController();
    const p = s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 500, stream },
      { signal: ac.signal }).then(async (st) => { if (stream) for await (const _ of st); });
    await sleep(300);
    const mid = await (await fetch(s.base + '/metrics')).text();
    assert.equal(metricValue(mid, 'moeserve:num_requests_running'), 1);
    assert.ok(metricValue(mid, 'moeserve:kv_cache_blocks_used') > 0);
    ac.abort();
    await p.catch(() => {});
    let running = 1;
    for (let i = 0; i < 40 && running; ++i) {
      await sleep(25);
      running = metricValue(await (await fetch(s.base + '/metrics')).text(), 'moeserve:num_requests_running');
    }
    assert.equal(running, 0, 'aborted within a second, not after 500 tokens (10 s)');
  }
  const after = await (await fetch(s.base + '/metrics')).text();
  assert.equal(metricValue(after, 'moeserve:kv_cache_blocks_used'), 0);
  assert.equal(metricValue(after, 'moeserve:request_success_total', 'abort'), abortsBefore + 2);
});

const connect = (port) => new Promise((resolve, reject) => {
  const sock = net.connect(port, '127.0.0.1', () => { sock.destroy(); resolve(); });
  sock.on('error', reject);
});

test('graceful drain: SIGTERM lets a running stream finish, refuses new connections, exits 0', async () => {
  const s = await startServer(['--scripted-output', writeTemp('r.txt', TEXT), '--scripted-tick-ms', '20']);
  const stream = await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100, stream: true });
  let text = '';
  let finish = null;
  let signalled = false;
  for await (const ch of stream) {
    text += ch.choices[0].text;
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    if (!signalled) { signalled = true; s.proc.kill('SIGTERM'); await sleep(50);
      await assert.rejects(connect(s.port), /ECONNREFUSED/); }
  }
  assert.equal(text, TEXT);
  assert.equal(finish, 'stop');
  const { code } = await s.exited;
  assert.equal(code, 0);
});

test('metrics: Prometheus exposition with moeserve: names', async () => {
  const s = await server('text', TEXT);
  await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 3 });
  const res = await fetch(s.base + '/metrics');
  assert.equal(res.status, 200);
  const m = await res.text();
  for (const name of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc',
    'kv_cache_blocks_used', 'kv_cache_blocks_total', 'prompt_tokens_total', 'generation_tokens_total',
    'prefix_cache_hits_total'])
    assert.ok(m.includes(`# TYPE moeserve:${name} `), name);
  assert.ok(metricValue(m, 'moeserve:request_success_total', 'finished_reason="length"') >= 1);
  assert.ok(metricValue(m, 'moeserve:time_to_first_token_seconds_count') >= 1);
  assert.ok(m.includes(`moeserve:e2e_request_latency_seconds_bucket{model_name="${MODEL}",le="+Inf"}`));
  assert.ok(m.includes('moeserve:time_per_output_token_seconds_sum'));
});

test('models, version, health, tokenize/detokenize', async () => {
  const s = await server('text', TEXT);
  const models = await s.client().models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL, 'model']);  // --model string, folder
  assert.equal(models.data[0].owned_by, 'moeserve');
  assert.equal(models.data[0].max_model_len, 4096);
  assert.equal((await fetch(s.base + '/health')).status, 200);
  // The version is CMake's PROJECT_VERSION.
  const cmake = fs.readFileSync(path.join(process.env.MOESERVE_SOURCE_DIR, 'CMakeLists.txt'), 'utf8');
  const projectVersion = cmake.match(/project\(moeserve VERSION ([0-9.]+)/)[1];
  assert.equal((await (await fetch(s.base + '/version')).json()).version, projectVersion);
  const t = await post(s.base, '/tokenize', { prompt: 'Hello there', add_special_tokens: false });
  assert.equal(t.json.count, t.json.tokens.length);
  assert.equal(t.json.max_model_len, 4096);
  assert.equal((await post(s.base, '/detokenize', { tokens: t.json.tokens })).json.prompt, 'Hello there');
});

await run(async () => { for (const s of Object.values(servers)) await s.stop(); });
