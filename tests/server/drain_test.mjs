// Graceful drain at its deadline, as vLLM does it: every stream counts as a running request; when
// --drain-timeout passes, each open stream gets a final chunk (finish_reason "abort") and
// `data: [DONE]`, each waiting non-streamed request a 503 with an OpenAI error body; the server
// exits 0 within a second of the deadline and logs what it aborted.
import assert from 'node:assert/strict';
import { startServer, test, run, writeTemp, parseSse, parseNamedSse, sleep } from './harness.mjs';

const TEXT = 'Hello there! The answer is 42, said the machine. ';

// Never rejects: a connection that fails or is cut gives {status: 0, error}.
async function rawPost(base, route, body) {
  try {
    const res = await fetch(base + route, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  } catch (error) {
    return { status: 0, text: '', error };
  }
}

test('drain deadline: 20 streams end with an abort chunk and [DONE], waiting requests get 503, exit 0 within +1 s', async () => {
  const s = await startServer(['--scripted-output', writeTemp('r.txt', TEXT.repeat(100)), '--scripted-tick-ms', '50',
    '--drain-timeout', '1']);
  try {
    const streams = [];
    for (let i = 0; i < 10; ++i) {
      streams.push(rawPost(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 3000, stream: true }));
      streams.push(rawPost(s.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 3000, stream: true, stream_options: { include_usage: true } }));
    }
    const plain = [rawPost(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 3000 }),
      rawPost(s.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3000 })];
    await sleep(1000);
    const t0 = Date.now();
    s.proc.kill('SIGTERM');
    const { code } = await s.exited;
    const took = Date.now() - t0;
    console.log(`  exited ${took} ms after SIGTERM (--drain-timeout 1)`);
    assert.equal(code, 0);
    assert.ok(took < 2000, `exited ${took} ms after SIGTERM with --drain-timeout 1`);
    assert.ok(took >= 900, `exited after ${took} ms: the streams were not given their drain time`);
    for (const p of streams) {
      const r = await p;
      assert.equal(r.status, 200, String(r.error?.cause ?? r.error));
      const events = parseSse(r.text);
      assert.equal(events.at(-1), '[DONE]', 'the stream ends with [DONE]');
      const finishes = events.filter((e) => e !== '[DONE]').flatMap((e) => e.choices)
        .map((c) => c.finish_reason).filter((f) => f);
      assert.deepEqual(finishes, ['abort']);
      const text = events.filter((e) => e !== '[DONE]').flatMap((e) => e.choices)
        .map((c) => (c.text ?? '') + (c.delta?.content ?? '') + (c.delta?.reasoning_content ?? '')).join('');
      assert.ok(text.length > 0, 'tokens were streamed before the deadline');
    }
    for (const p of plain) {
      const r = await p;
      assert.equal(r.status, 503, r.text);
      const e = JSON.parse(r.text).error;
      assert.equal(e.type, 'service_unavailable');
      assert.ok(e.message.length > 0);
    }
    assert.match(s.log(), /aborting 20 streams and 2 other requests/);
  } finally { await s.stop(); }
});

test('drain deadline: Anthropic streams end with an error event, Responses streams with response.failed', async () => {
  const s = await startServer(['--scripted-output', writeTemp('r.txt', TEXT.repeat(100)), '--scripted-tick-ms', '50',
    '--drain-timeout', '1']);
  try {
    const messages = [{ role: 'user', content: 'Hi' }];
    const anthropic = [1, 2].map(() => rawPost(s.base, '/v1/messages',
      { model: 'model', max_tokens: 3000, messages, stream: true }));
    const responses = [1, 2].map(() => rawPost(s.base, '/v1/responses',
      { model: 'model', input: 'Hi', max_output_tokens: 3000, stream: true }));
    await sleep(1000);
    s.proc.kill('SIGTERM');
    assert.equal((await s.exited).code, 0);
    for (const p of anthropic) {
      const events = parseNamedSse((await p).text);
      assert.equal(events[0].event, 'message_start');
      assert.ok(events.some((e) => e.event === 'content_block_delta'), 'tokens were streamed before the deadline');
      assert.deepEqual(events.at(-1).data.error.type, 'overloaded_error');
      assert.equal(events.at(-1).event, 'error');
      assert.ok(!events.some((e) => e.event === 'message_stop'));
    }
    for (const p of responses) {
      const events = parseNamedSse((await p).text);
      assert.equal(events[0].event, 'response.created');
      const last = events.at(-1);
      assert.equal(last.event, 'response.failed');
      assert.equal(last.data.response.status, 'failed');
      assert.equal(last.data.response.error.code, 'server_error');
      assert.ok(last.data.response.output.length > 0, 'the items streamed so far are in the failed response');
    }
  } finally { await s.stop(); }
});

test('drain: streams that end before the deadline are waited for, not aborted', async () => {
  const s = await startServer(['--scripted-output', writeTemp('r.txt', TEXT), '--scripted-tick-ms', '20',
    '--drain-timeout', '10']);
  try {
    const streams = Array.from({ length: 5 }, () =>
      rawPost(s.base, '/v1/completions', { prompt: 'Hi', max_tokens: 3000, stream: true }));
    await sleep(200);
    const t0 = Date.now();
    s.proc.kill('SIGTERM');
    const { code } = await s.exited;
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 < 5000);
    for (const p of streams) {
      const events = parseSse((await p).text);
      assert.equal(events.at(-1), '[DONE]');
      assert.equal(events.at(-2).choices[0].finish_reason, 'stop');
    }
    assert.doesNotMatch(s.log(), /aborting/);
  } finally { await s.stop(); }
});

await run();
