// The `vllm serve` command line (issue 13 item 3): ATOM's and a typical vLLM command line both
// serve; underscore spellings, size suffixes, a positional model, several served names (default:
// the --model string and the folder's name), vLLM flags ignored with one warning or refused,
// --max-model-len checked against max_position_embeddings, --chat-template inline or a file,
// VLLM_API_KEY, and CORS with vLLM's defaults.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { BIN, MODEL, post, run, test, startMoeserve, writeTemp } from './harness.mjs';

// Starts `moeserve <argv>` (no arguments added but --port 0) and waits until it serves.
const serve = (argv, env = {}) => startMoeserve(argv, { env });

// Runs `moeserve <argv>` expecting it to refuse to start; returns {code, log}.
function refuse(argv, env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, [...argv, '--port', '0'], {
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stderr.on('data', (d) => { log += d; });
    proc.stdout.on('data', (d) => { log += d; });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error('still running:\n' + log)); }, 30000);
    proc.on('exit', (code) => { clearTimeout(timer); resolve({ code, log }); });
  });
}

const HELLO = [{ role: 'user', content: 'How many clips?' }];

async function chatWorks(s, model) {
  const r = await s.client().chat.completions.create({ model, messages: HELLO, max_tokens: 4 });
  assert.equal(r.choices.length, 1);
  assert.ok(r.usage.completion_tokens >= 1);
  return r;
}

test("ATOM's command line serves", async () => {
  const s = await serve(['serve', '--model', MODEL, '-tp', '1', '--kv_cache_dtype', 'fp8',
    '--max-model-len', '2048', '--gpu-memory-utilization', '0.90']);
  try {
    const models = await s.client().models.list();
    assert.equal(models.data[0].max_model_len, 2048);
    await chatWorks(s, models.data[0].id);
    assert.doesNotMatch(s.log(), /ignoring vLLM flags/);
  } finally { await s.stop(); }
});

test('a typical vllm serve command line serves, ignored flags named in one warning', async () => {
  const s = await serve(['serve', MODEL, '--max_model_len', '2k', '--dtype', 'auto',
    '--tokenizer', MODEL, '--trust-remote-code', '--enforce-eager', '--disable_log_requests',
    '--enable-chunked-prefill', '--swap-space', '4', '--guided-decoding-backend', 'xgrammar',
    '--enable-prefix-caching', '--served-model-name', 'minimax', 'm2', '--host', '127.0.0.1',
    '--max-num-seqs', '8', '--tensor_parallel_size', '1']);
  try {
    const models = await s.client().models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['minimax', 'm2']);
    assert.equal(models.data[0].max_model_len, 2000);  // 2k = 2000 (2K would be 2048)
    assert.equal((await chatWorks(s, 'm2')).model, 'minimax');
    const other = await post(s.base, '/v1/chat/completions', { model: 'model', messages: HELLO });
    assert.equal(other.status, 404);
    const warnings = s.log().split('\n').filter((l) => l.includes('ignoring vLLM flags'));
    assert.equal(warnings.length, 1, s.log());
    for (const flag of ['--dtype auto', '--tokenizer', '--trust-remote-code', '--enforce-eager',
      '--enable-chunked-prefill', '--swap-space 4', '--guided-decoding-backend xgrammar'])
      assert.ok(warnings[0].includes(flag), `${flag} missing from: ${warnings[0]}`);
  } finally { await s.stop(); }
});

test('default served names: the --model string as given and the folder name', async () => {
  const s = await serve(['serve', '--model', MODEL, '--max-model-len', '3K']);
  try {
    const models = await s.client().models.list();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL, path.basename(MODEL)]);
    assert.equal(models.data[0].max_model_len, 3072);
    assert.equal((await chatWorks(s, MODEL)).model, MODEL);
    await chatWorks(s, path.basename(MODEL));
  } finally { await s.stop(); }
});

test('flags that would change results are refused with a message', async () => {
  for (const [argv, pattern] of [
    [['--dtype', 'float16'], /--dtype float16 is not supported/],
    [['--quantization', 'awq'], /--quantization awq is not supported/],
    [['-q', 'fp8'], /--quantization fp8 is not supported/],
    [['--tokenizer', '/somewhere/else'], /--tokenizer \/somewhere\/else is not supported/],
    [['--enable-lora'], /--enable-lora is not supported/],
    [['-pp', '2'], /--pipeline-parallel-size 2 is not supported/],
    [['--max-model-len', '1.5K'], /decimals/],
    [['--no-such-flag'], /no-such-flag/],
  ]) {
    const r = await refuse(['serve', MODEL, ...argv]);
    assert.notEqual(r.code, 0, argv.join(' '));
    assert.match(r.log, pattern);
  }
});

test('--max-model-len above max_position_embeddings: refused, or allowed by the env var', async () => {
  const r = await refuse(['serve', MODEL, '--max-model-len', '8k']);
  assert.notEqual(r.code, 0);
  assert.match(r.log, /--max-model-len 8000 is greater than the model's max_position_embeddings 4096/);
  assert.match(r.log, /VLLM_ALLOW_LONG_MAX_MODEL_LEN=1/);
  const s = await serve(['serve', MODEL, '--max-model-len', '8k', '--kv-cache-memory-bytes', '64M'],
    { VLLM_ALLOW_LONG_MAX_MODEL_LEN: '1' });
  try {
    assert.equal((await s.client().models.list()).data[0].max_model_len, 8000);
  } finally { await s.stop(); }
});

test('--chat-template: inline text or a file, as vLLM', async () => {
  const inline = '{% for m in messages %}<<{{ m.content }}>>{% endfor %}';
  const file = writeTemp('t.jinja', '{% for m in messages %}[[{{ m.content }}]]{% endfor %}');
  for (const [tmpl, want] of [[inline, '<<hello>>'], [file, '[[hello]]']]) {
    const s = await serve(['serve', MODEL, '--chat-template', tmpl]);
    try {
      const viaChat = await post(s.base, '/tokenize', { messages: [{ role: 'user', content: 'hello' }] });
      const direct = await post(s.base, '/tokenize', { prompt: want, add_special_tokens: false });
      assert.deepEqual(viaChat.json.tokens, direct.json.tokens);
    } finally { await s.stop(); }
  }
  const r = await refuse(['serve', MODEL, '--chat-template', '/no/such/template.jinja']);
  assert.notEqual(r.code, 0);
  assert.match(r.log, /looks like a file path/);
});

test('VLLM_API_KEY is honoured as MOESERVE_API_KEY', async () => {
  const s = await serve(['serve', MODEL], { VLLM_API_KEY: 'sekret', MOESERVE_API_KEY: '' });
  try {
    assert.equal((await fetch(s.base + '/v1/models')).status, 401);
    const ok = await fetch(s.base + '/v1/models', { headers: { authorization: 'Bearer sekret' } });
    assert.equal(ok.status, 200);
  } finally { await s.stop(); }
});

test('CORS: preflight answered, fields on responses, vLLM defaults', async () => {
  const s = await serve(['serve', MODEL], { MOESERVE_API_KEY: 'k' });
  try {
    const pre = await fetch(s.base + '/v1/chat/completions', { method: 'OPTIONS', headers: {
      origin: 'https://app.example', 'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type' } });
    assert.equal(pre.status, 200);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    assert.equal(pre.headers.get('access-control-allow-headers'), 'authorization, content-type');
    const get = await fetch(s.base + '/v1/models', { headers: { origin: 'https://app.example', authorization: 'Bearer k' } });
    assert.equal(get.status, 200);
    assert.equal(get.headers.get('access-control-allow-origin'), '*');
    const plain = await fetch(s.base + '/health');
    assert.equal(plain.headers.get('access-control-allow-origin'), null);
  } finally { await s.stop(); }
  const t = await serve(['serve', MODEL, '--allowed-origins', '["https://ok.example"]',
    '--allowed_methods', '["GET", "POST"]', '--allow-credentials']);
  try {
    const bad = await fetch(t.base + '/v1/models', { method: 'OPTIONS', headers: {
      origin: 'https://evil.example', 'access-control-request-method': 'PUT' } });
    assert.equal(bad.status, 400);
    assert.equal(await bad.text(), 'Disallowed CORS origin, method');
    const good = await fetch(t.base + '/v1/models', { method: 'OPTIONS', headers: {
      origin: 'https://ok.example', 'access-control-request-method': 'GET' } });
    assert.equal(good.status, 200);
    assert.equal(good.headers.get('access-control-allow-origin'), 'https://ok.example');
    assert.equal(good.headers.get('access-control-allow-credentials'), 'true');
    const get = await fetch(t.base + '/v1/models', { headers: { origin: 'https://ok.example' } });
    assert.equal(get.headers.get('access-control-allow-origin'), 'https://ok.example');
  } finally { await t.stop(); }
});

await run();
