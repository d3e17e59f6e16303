// Observability (issue 13 item 6): a log line per finished request, vLLM's periodic stats line
// while busy, failed requests logged with a request id the client gets too, load progress, and
// Prometheus metrics under vLLM's `vllm:` names.
import assert from 'node:assert/strict';
import { startServer, test, run, writeTemp, post, metricValue, sleep } from './harness.mjs';

const REPLY = 'One two three four five six seven eight nine ten eleven twelve.';
const user = [{ role: 'user', content: 'Count.' }];
const stats = { VLLM_LOG_STATS_INTERVAL: '0.2' };

function scripted(extra = [], env = stats) {
  return startServer(['--scripted-output', writeTemp('reply.txt', REPLY), '--scripted-tick-ms', '60', ...extra], { env });
}

test('a log line per finished request; the stats line while busy', async () => {
  const s = await scripted();
  try {
    await sleep(500);  // idle: no stats line
    assert.doesNotMatch(s.log(), /Avg prompt throughput/);
    const r = await s.client().chat.completions.create({ model: 'model', messages: user });
    await sleep(100);
    const line = s.log().split('\n').find((l) => / finished \(stop\)/.test(l));
    assert.ok(line, s.log());
    const m = line.match(/request (\d+) finished \(stop\): prompt (\d+) tokens \((\d+) cached\), output (\d+) tokens, TTFT ([\d.]+) s, e2e ([\d.]+) s/);
    assert.ok(m, line);
    assert.equal(Number(m[2]), r.usage.prompt_tokens);
    assert.equal(Number(m[4]), r.usage.completion_tokens);
    assert.ok(Number(m[5]) <= Number(m[6]));
    assert.match(s.log(), /Avg prompt throughput: [\d.]+ tokens\/s, Avg generation throughput: [\d.]+ tokens\/s, Running: 1 reqs, Waiting: 0 reqs, KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%/);
  } finally { await s.stop(); }
});

test('--disable-log-requests and --disable-log-stats turn the lines off', async () => {
  const s = await scripted(['--disable-log-requests', '--disable-log-stats']);
  try {
    await s.client().chat.completions.create({ model: 'model', messages: user });
    await sleep(300);
    assert.doesNotMatch(s.log(), /finished \(stop\)|Avg prompt throughput/);
  } finally { await s.stop(); }
});

test('failed requests are logged with a request id the client gets', async () => {
  const s = await scripted();
  try {
    const mine = await post(s.base, '/v1/chat/completions', { model: 'model', messages: 'nope' },
      { 'x-request-id': 'client-id-7' });
    assert.equal(mine.status, 400);
    assert.equal(mine.headers.get('x-request-id'), 'client-id-7');
    const ours = await post(s.base, '/v1/chat/completions', { model: 'model', messages: 'nope' });
    const id = ours.headers.get('x-request-id');
    assert.match(id, /^req-\d+$/);
    await sleep(50);
    for (const rid of ['client-id-7', id])
      assert.match(s.log(), new RegExp(`request ${rid} POST /v1/chat/completions failed: 400 .*messages`));
  } finally { await s.stop(); }
});

test('metrics also under vLLM names', async () => {
  const s = await scripted();
  try {
    await s.client().chat.completions.create({ model: 'model', messages: user });
    const text = await (await fetch(s.base + '/metrics')).text();
    const l = 'engine="0"';
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
      'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:prefix_cache_queries_total',
      'vllm:prefix_cache_hits_total', 'vllm:num_preemptions_total'])
      assert.equal(typeof metricValue(text, name, l), 'number', name);
    assert.equal(metricValue(text, 'vllm:request_success_total', 'finished_reason="stop"'), 1);
    assert.equal(metricValue(text, 'vllm:time_to_first_token_seconds_count', l), 1);
    assert.equal(metricValue(text, 'vllm:e2e_request_latency_seconds_count', l), 1);
    assert.equal(metricValue(text, 'vllm:request_prompt_tokens_count', l), 1);
    assert.ok(metricValue(text, 'vllm:generation_tokens_total', l) >= 1);
    assert.match(text, /# TYPE vllm:time_to_first_token_seconds histogram/);
    assert.equal(metricValue(text, 'moeserve:num_requests_running'), 0);  // moeserve: names kept
  } finally { await s.stop(); }
});

test('weights loading reports progress (log lines when stderr is no terminal)', async () => {
  const s = await startServer([]);
  try {
    assert.match(s.log(), /loading weights: 100% \([\d.]+ \/ [\d.]+ GiB, 1\/1 shards\)/);
  } finally { await s.stop(); }
});

await run();
