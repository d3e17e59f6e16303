// Soak benchmark (issue 14): mixed traffic against `moeserve serve` for a long time, then checks
// that the server never crashed, freed every KV block, kept its RSS flat and answered every bad
// request with a well-formed OpenAI error. Loopback only, bounded by a hard timeout.
//
//   node bench/soak/soak.mjs [--duration 1800] [--concurrency 64] [--bin build/src/apps/moeserve]
//                            [--model models/minimax-m2-tiny] [--out DIR] [--seed 1]
//   node bench/soak/soak.mjs --base-url http://127.0.0.1:8000 [--pid PID] ...   (a running server)
//
// Traffic (each of --concurrency workers loops, drawing a kind by weight): chat and completions
// through the official `openai` client, streamed and not, with n > 1, stop strings, logprobs;
// streams cancelled mid-way (AbortController) and non-streamed requests abandoned in flight;
// raw sockets closed mid-stream and mid-body; bad input (malformed JSON, wrong types, limits,
// unknown model / route / method) expecting a 4xx with {error: {message, type, param, code}};
// bodies just under --max-request-bytes (200) and over it (413, Content-Length and chunked).
//
// Sampled every --sample-every s: VmRSS of the server and /metrics (KV blocks used, running,
// waiting). After --warmup-frac of the run (which includes one pause of its own), traffic pauses
// until the server is idle and the idle RSS is the baseline; at the end, the same idle
// measurement is compared with it.
// Checks (exit 1 on any violation): the server alive throughout and exits 0 on SIGTERM at the end;
// 0 KV blocks in use and 0 running / waiting when idle; idle RSS drift < --max-rss-drift-pct;
// every response what its kind expects (well-formed errors included); no request unanswered.
// Self-tests of the checks: --kill-server-at S (SIGKILL the server at S s: must fail),
// --inflight-at-check (a request is running when KV blocks are read: must fail).
// --idle-hook CMD: a shell command run at each idle point (warm-up pause, baseline, checks, end)
// after the idle RSS is read and before traffic resumes, with SOAK_PID, SOAK_T (s) and SOAK_LABEL
// in its environment (e.g. bench/soak/heap_dump.sh: smaps_rollup and malloc_info of the server).
import { execSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const require = createRequire(path.join(process.env.MOESERVE_NODE_MODULES || path.join(ROOT, 'node_modules'), 'x.js'));
const OpenAI = require('openai').default ?? require('openai');

// ---- options ----
const opt = {
  duration: 1800, concurrency: 64, bin: path.join(ROOT, 'build/src/apps/moeserve'),
  model: path.join(ROOT, 'models/minimax-m2-tiny'), baseUrl: '', pid: 0, out: '',
  seed: 1, sampleEvery: 5, warmupFrac: 0.1, maxRssDriftPct: 5, maxRequestBytes: 1 << 20,
  maxModelLen: 1024, kvCacheMemory: 16 << 20, serveFlags: '', requestTimeout: 120,
  killServerAt: 0, idleChecks: 10, kinds: '', largeBytes: 0, inflightAtCheck: false, hardTimeout: 0,
  idleHook: '',
};
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i];
  const key = a.replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  if (!(key in opt) || !a.startsWith('--')) { console.error(`unknown argument ${a}`); process.exit(2); }
  if (typeof opt[key] === 'boolean') opt[key] = true;
  else opt[key] = typeof opt[key] === 'number' ? Number(process.argv[++i]) : process.argv[++i];
}
if (!opt.hardTimeout) opt.hardTimeout = opt.duration + 600;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now() / 1000;
const T0 = now();
const elapsed = () => now() - T0;
const log = (...a) => console.log(`[${elapsed().toFixed(0).padStart(5)}s]`, ...a);

// Seeded PRNG (mulberry32): the same --seed gives the same mix of requests.
let rngState = opt.seed >>> 0;
function rand() {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const WORDS = ('the a of and to in is you that it he was for on are as with his they at be this have ' +
  'from or one had by word but not what all were we when your can said there use an each which she do ' +
  'how their if will up other about out many then them these so some her would make like him into time ' +
  'has look two more write go see number no way could people my than first water been call who oil its ' +
  'now find long down day did get come made may part hello world server model token stream cancel').split(' ');
const text = (n) => Array.from({ length: n }, () => pick(WORDS)).join(' ');

// ---- the server ----
let server = null;       // { proc, pid, base, exited, logFile }
let crashed = null;      // description of the first crash seen
const violations = [];
const fail = (msg) => { violations.push(msg); log('VIOLATION:', msg); };

function isLoopback(host) {
  return ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host) || /^127\./.test(host);
}

async function startServer() {
  if (opt.baseUrl) {
    const u = new URL(opt.baseUrl);
    if (!isLoopback(u.hostname)) { console.error('--base-url must be a loopback address'); process.exit(2); }
    return { proc: null, pid: opt.pid || 0, base: u.origin, exited: new Promise(() => {}), logFile: null };
  }
  const args = ['serve', '--model', opt.model, '--host', '127.0.0.1', '--port', '0',
    '--kv-cache-memory', String(opt.kvCacheMemory), '--max-model-len', String(opt.maxModelLen),
    '--max-request-bytes', String(opt.maxRequestBytes), ...opt.serveFlags.split(' ').filter(Boolean)];
  const logFile = path.join(opt.out, 'server.log');
  const logFd = fs.openSync(logFile, 'w');
  const proc = spawn(opt.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let head = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + head)), 120000);
    const onData = (d) => {
      fs.writeSync(logFd, d);
      if (head.length < 65536) head += d.toString();
      const m = head.match(/serving .* on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`server exited ${code ?? signal}:\n${head}`)); });
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    try { if ((await fetch(base + '/health')).status === 200) break; } catch { /* not yet */ }
    await sleep(100);
  }
  log(`started ${opt.bin} serve (pid ${proc.pid}) on ${base}: ${args.slice(1).join(' ')}`);
  return { proc, pid: proc.pid, base, exited, logFile };
}

function rssKb(pid) {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
  } catch { return NaN; }
}

function metric(textBody, name) {
  for (const line of textBody.split('\n')) {
    if (line.startsWith(name + '{') || line.startsWith(name + ' ')) return Number(line.split(' ').pop());
  }
  return NaN;
}

async function readMetrics() {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10000);
  try {
    const body = await (await fetch(server.base + '/metrics', { signal: ctl.signal })).text();
    return {
      running: metric(body, 'moeserve:num_requests_running'),
      waiting: metric(body, 'moeserve:num_requests_waiting'),
      kvUsed: metric(body, 'moeserve:kv_cache_blocks_used'),
      kvTotal: metric(body, 'moeserve:kv_cache_blocks_total'),
      preemptions: metric(body, 'moeserve:num_preemptions_total'),
      genTokens: metric(body, 'moeserve:generation_tokens_total'),
      promptTokens: metric(body, 'moeserve:prompt_tokens_total'),
    };
  } finally { clearTimeout(timer); }
}

// ---- per-kind accounting ----
const stats = new Map();   // kind -> {ok, expectedError, cancelled, unexpected}
const examples = [];       // the first unexpected outcomes, for the report
function count(kind, outcome, detail) {
  if (!stats.has(kind)) stats.set(kind, { ok: 0, expectedError: 0, cancelled: 0, unexpected: 0 });
  ++stats.get(kind)[outcome];
  if (outcome === 'unexpected' && examples.length < 30) examples.push(`${elapsed().toFixed(0)}s ${kind}: ${detail}`);
}
class Unexpected extends Error {}
const check = (cond, msg) => { if (!cond) throw new Unexpected(msg); };

// An OpenAI-style error body: {error: {message: non-empty string, type: string, param, code}}.
function checkErrorBody(status, bodyText, expectStatus, expectParam) {
  check(status === expectStatus, `status ${status}, expected ${expectStatus}: ${bodyText.slice(0, 200)}`);
  let j;
  try { j = JSON.parse(bodyText); } catch { throw new Unexpected(`error body is not JSON: ${bodyText.slice(0, 200)}`); }
  const e = j && j.error;
  check(e && typeof e === 'object', `no error object: ${bodyText.slice(0, 200)}`);
  check(typeof e.message === 'string' && e.message.length > 0, `error.message: ${bodyText.slice(0, 200)}`);
  check(typeof e.type === 'string' && e.type.length > 0, `error.type: ${bodyText.slice(0, 200)}`);
  check('param' in e && (e.param === null || typeof e.param === 'string'), `error.param: ${bodyText.slice(0, 200)}`);
  check('code' in e && (e.code === null || ['string', 'number'].includes(typeof e.code)), `error.code: ${bodyText.slice(0, 200)}`);
  if (expectParam !== undefined) check(e.param === expectParam, `param ${e.param}, expected ${expectParam}`);
}

const FINISH = new Set(['stop', 'length']);
function sampling(chat) {
  const p = { max_tokens: randInt(1, 48), temperature: pick([0, 0, 0.7, 1.0]) };
  if (rand() < 0.5) p.seed = randInt(0, 1 << 30);
  if (rand() < 0.3) p.top_p = pick([0.5, 0.9]);
  if (rand() < 0.3) p.ignore_eos = true;
  if (rand() < 0.3) p.n = randInt(2, 4);
  if (rand() < 0.3) p.stop = Array.from({ length: randInt(1, 3) }, () => pick(WORDS.slice(0, 30)));
  if (rand() < 0.3) {
    if (chat) { p.logprobs = true; p.top_logprobs = randInt(0, 5); } else p.logprobs = randInt(0, 5);
  }
  return p;
}
function checkNoStop(out, p) {
  if (!p.stop) return;
  for (const s of p.stop) check(!out.includes(s), `output ${JSON.stringify(out)} contains stop string ${JSON.stringify(s)}`);
}

function client() {
  return new OpenAI({ baseURL: server.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: opt.requestTimeout * 1000 });
}
const sharedClient = { c: null };
let MODEL_ID = 'model';   // the served name, from /v1/models at the start
const api = () => (sharedClient.c ??= client());

// ---- request kinds ----
async function chatOnce(stream) {
  const p = sampling(true);
  const messages = [{ role: 'user', content: text(randInt(1, 60)) }];
  if (rand() < 0.3) messages.unshift({ role: 'system', content: text(randInt(1, 20)) });
  const n = p.n ?? 1;
  if (!stream) {
    const r = await api().chat.completions.create({ model: MODEL_ID, messages, ...p });
    check(r.object === 'chat.completion', `object ${r.object}`);
    check(r.choices.length === n, `${r.choices.length} choices, n=${n}`);
    for (const c of r.choices) {
      check(FINISH.has(c.finish_reason), `finish_reason ${c.finish_reason}`);
      check(c.message.role === 'assistant', `role ${c.message.role}`);
      const out = (c.message.content ?? '') + (c.message.reasoning_content ?? '');
      check(typeof out === 'string', 'content');
      if (p.logprobs) {
        check(Array.isArray(c.logprobs?.content), 'logprobs.content missing');
        for (const t of c.logprobs.content) {
          check(typeof t.logprob === 'number' && t.logprob <= 0, `logprob ${t.logprob}`);
          check(t.top_logprobs.length === p.top_logprobs, `top_logprobs ${t.top_logprobs.length} != ${p.top_logprobs}`);
        }
      }
    }
    check(r.usage && r.usage.completion_tokens <= n * p.max_tokens, `usage ${JSON.stringify(r.usage)}`);
    return;
  }
  const s = await api().chat.completions.create({ model: MODEL_ID, messages, ...p, stream: true,
    stream_options: { include_usage: true } });
  const finish = new Map();
  const outs = new Map();
  let usage = null;
  for await (const chunk of s) {
    check(chunk.object === 'chat.completion.chunk', `object ${chunk.object}`);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      check(c.index >= 0 && c.index < n, `choice index ${c.index}, n=${n}`);
      check(!finish.has(c.index), `chunk after finish_reason for choice ${c.index}`);
      outs.set(c.index, (outs.get(c.index) ?? '') + (c.delta?.content ?? ''));
      if (c.finish_reason) finish.set(c.index, c.finish_reason);
    }
  }
  check(finish.size === n, `${finish.size} choices finished, n=${n}`);
  for (const [i, f] of finish) {
    check(FINISH.has(f), `finish_reason ${f}`);
    checkNoStop(outs.get(i) ?? '', p);
  }
  check(usage && usage.completion_tokens <= n * p.max_tokens, `usage ${JSON.stringify(usage)}`);
}

async function completionOnce(stream) {
  const p = sampling(false);
  const prompt = rand() < 0.2 ? Array.from({ length: randInt(1, 80) }, () => randInt(0, 1000)) : text(randInt(1, 80));
  const n = p.n ?? 1;
  if (!stream) {
    const r = await api().completions.create({ model: MODEL_ID, prompt, ...p });
    check(r.object === 'text_completion', `object ${r.object}`);
    check(r.choices.length === n, `${r.choices.length} choices, n=${n}`);
    for (const c of r.choices) {
      check(FINISH.has(c.finish_reason), `finish_reason ${c.finish_reason}`);
      check(typeof c.text === 'string', 'text');
      checkNoStop(c.text, p);
      if (p.logprobs !== undefined) {
        const lp = c.logprobs;
        check(lp && Array.isArray(lp.tokens) && lp.tokens.length === lp.token_logprobs.length, 'logprobs shape');
        if (p.logprobs > 0) {
          check(lp.top_logprobs.length === lp.tokens.length, 'top_logprobs length');
          for (const t of lp.top_logprobs) check(Object.keys(t).length >= 1 && Object.keys(t).length <= p.logprobs + 1, `top_logprobs ${JSON.stringify(t)}`);
        }
      }
    }
    check(r.usage && r.usage.completion_tokens <= n * p.max_tokens, `usage ${JSON.stringify(r.usage)}`);
    return;
  }
  const s = await api().completions.create({ model: MODEL_ID, prompt, ...p, stream: true });
  const finish = new Map();
  const outs = new Map();
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      check(c.index >= 0 && c.index < n, `choice index ${c.index}, n=${n}`);
      check(!finish.has(c.index), `chunk after finish_reason for choice ${c.index}`);
      outs.set(c.index, (outs.get(c.index) ?? '') + c.text);
      if (c.finish_reason) finish.set(c.index, c.finish_reason);
    }
  }
  check(finish.size === n, `${finish.size} choices finished, n=${n}`);
  for (const [i, f] of finish) { check(FINISH.has(f), `finish_reason ${f}`); checkNoStop(outs.get(i) ?? '', p); }
}

// A stream cancelled after a few chunks (the SDK aborts the fetch: the server sees the connection close).
async function cancelStream(st = {}) {
  const ctl = new AbortController();
  st.phase = 'create';
  const after = randInt(0, 6);
  const chat = rand() < 0.5;
  const body = { model: MODEL_ID, max_tokens: randInt(50, 400), ignore_eos: true, stream: true, n: rand() < 0.3 ? 2 : 1 };
  const s = chat
    ? await api().chat.completions.create({ ...body, messages: [{ role: 'user', content: text(randInt(1, 40)) }] }, { signal: ctl.signal })
    : await api().completions.create({ ...body, prompt: text(randInt(1, 40)) }, { signal: ctl.signal });
  let k = 0;
  st.phase = 'headers';
  try {
    for await (const chunk of s) {
      void chunk;
      st.phase = `chunk ${k + 1}, abort after ${after}`;
      // Abort, then stop reading: the SDK yields the chunks it has buffered without looking at
      // the signal, and a read of the body after the abort can hang for good (Node 20's fetch:
      // 2 of ~20 runs at seed 1 hung one request 120 s, "aborted after chunk 53"); `break` cancels
      // the body (the SDK aborts its request when the loop ends early). The server sees the same
      // disconnect either way.
      if (++k > after) {
        ctl.abort();
        st.phase = `aborted after chunk ${k}`;
        break;
      }
    }
    st.phase = `ended after ${k}`;
  } catch (e) {
    if (ctl.signal.aborted) return 'cancelled';
    throw e;
  }
  return ctl.signal.aborted ? 'cancelled' : 'ok';
}

// A non-streamed request abandoned while the server works on it.
async function cancelNonStream() {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), randInt(1, 300));
  try {
    const r = await fetch(server.base + '/v1/completions', { method: 'POST', signal: ctl.signal,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, prompt: text(randInt(1, 60)), max_tokens: randInt(100, 500), ignore_eos: true, n: randInt(1, 3) }) });
    const j = await r.json();
    check(r.status === 200 && j.choices, `status ${r.status}: ${JSON.stringify(j).slice(0, 200)}`);
    return 'ok';
  } catch (e) {
    if (ctl.signal.aborted) return 'cancelled';
    throw e;
  } finally { clearTimeout(timer); }
}

// Bad input: every case must get its 4xx with a well-formed error body.
const BAD = [
  ['/v1/completions', '{"prompt": "Hi",', 400],
  ['/v1/completions', '[1, 2]', 400],
  ['/v1/chat/completions', 'not json', 400],
  ['/v1/completions', '', 400],
  ['/v1/completions', () => ({ prompt: 'Hi', temperature: 'hot' }), 400, 'temperature'],
  ['/v1/completions', () => ({ prompt: 'Hi', max_tokens: '5' }), 400, 'max_tokens'],
  ['/v1/completions', () => ({ prompt: 'Hi', n: 1.5 }), 400, 'n'],
  ['/v1/completions', () => ({ prompt: 'Hi', stop: ['a', 1] }), 400, 'stop'],
  ['/v1/completions', () => ({ prompt: 'Hi', stop: [''] }), 400],
  ['/v1/completions', () => ({ prompt: [1, 'a'] }), 400, 'prompt'],
  ['/v1/completions', () => ({ prompt: 'Hi', top_p: 0 }), 400, 'top_p'],
  ['/v1/completions', () => ({ prompt: 'Hi', logprobs: 21 }), 400, 'logprobs'],
  ['/v1/completions', () => ({ prompt: 'Hi', n: 1000 }), 400],
  ['/v1/completions', () => ({ prompt: 'Hi', stop: Array.from({ length: 65 }, (_, i) => `s${i}`) }), 400],
  ['/v1/completions', () => ({ prompt: Array.from({ length: opt.maxModelLen + 10 }, () => randInt(0, 1000)), max_tokens: 1 }), 400],
  ['/v1/completions', () => ({ prompt: text(20), max_tokens: opt.maxModelLen * 4 }), 400],
  ['/v1/completions', () => ({ model: 'gpt-4', prompt: 'Hi' }), 404, 'model'],
  ['/v1/chat/completions', () => ({ messages: 'hello' }), 400, 'messages'],
  ['/v1/chat/completions', () => ({ messages: [{ content: 'no role' }] }), 400, 'messages'],
  ['/v1/chat/completions', () => ({ messages: [{ role: 'user', content: 5 }] }), 400, 'messages'],
  ['/v1/chat/completions', () => ({ messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 }), 400, 'top_logprobs'],
  ['/v1/chat/completions', () => ({ messages: [{ role: 'user', content: 'x' }], chat_template_kwargs: { messages: [] } }), 400],
  ['/v1/completions', Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), 400],
  ['/v1/nothing', '{}', 404],
  ['GET /v1/completions', null, 405],
];
async function badInput() {
  const [route, body, status, param] = pick(BAD);
  let res;
  if (route.startsWith('GET ')) res = await fetch(server.base + route.slice(4));
  else {
    res = await fetch(server.base + route, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: typeof body === 'function' ? JSON.stringify(body()) : body });
  }
  checkErrorBody(res.status, await res.text(), status, param);
  return 'expectedError';
}

// ---- raw sockets ----
function parseResponses(buf, closed) {
  const responses = [];
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) break;
    const lines = buf.slice(0, end).split('\r\n');
    const status = Number(lines[0].split(' ')[1]);
    const headers = {};
    for (const l of lines.slice(1)) { const i = l.indexOf(':'); headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim(); }
    let rest = buf.slice(end + 4);
    let body = '';
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length < n) break;
      body = rest.slice(0, n); rest = rest.slice(n);
    } else if ((headers['transfer-encoding'] || '').includes('chunked')) {
      let complete = false;
      for (;;) {
        const le = rest.indexOf('\r\n');
        if (le < 0) break;
        const size = parseInt(rest.slice(0, le), 16);
        if (rest.length < le + 2 + size + 2) break;
        body += rest.slice(le + 2, le + 2 + size); rest = rest.slice(le + 2 + size + 2);
        if (size === 0) { complete = true; break; }
      }
      if (!complete) break;
    } else { if (!closed) break; body = rest; rest = ''; }
    responses.push({ status, headers, body });
    buf = rest;
  }
  return responses;
}

// Writes `parts` one after another (a function part is called with the socket), and resolves with
// the first response, or {closed/timedOut} when none came. `stopWhen(buf)` ends it early.
function rawExchange(parts, { timeoutMs = opt.requestTimeout * 1000, stopWhen } = {}) {
  return new Promise((resolve) => {
    const port = Number(new URL(server.base).port);
    let buf = '';
    let done = false;
    const sock = net.connect(port, '127.0.0.1');
    const finish = (extra) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ response: parseResponses(buf, extra.closed)[0] ?? null, raw: buf, ...extra });
    };
    const timer = setTimeout(() => finish({ timedOut: true }), timeoutMs);
    sock.on('connect', async () => {
      for (const p of parts) {
        if (done) return;
        if (typeof p === 'function') { await p(sock); continue; }
        // Honour backpressure: large bodies are written in pieces; the server may answer 413
        // and close before taking it all (EPIPE / ECONNRESET are then expected).
        if (!sock.write(p)) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
      }
    });
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      if (stopWhen ? stopWhen(buf) : parseResponses(buf, false).length >= 1) finish({});
    });
    sock.on('end', () => finish({ closed: true }));
    sock.on('close', () => finish({ closed: true }));
    sock.on('error', (e) => finish({ closed: true, error: e.code }));
  });
}

const head = (route, extra) => `POST ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}\r\n`;

// A body of exactly `size` bytes: a small request padded with JSON whitespace.
function paddedBody(size) {
  const core = JSON.stringify({ model: MODEL_ID, prompt: text(randInt(1, 20)), max_tokens: randInt(1, 8) });
  return core.slice(0, -1) + ' '.repeat(size - core.length) + '}';
}

async function largeOk() {
  const size = (opt.largeBytes || opt.maxRequestBytes) - randInt(0, 4096);
  const body = paddedBody(size);
  const res = await fetch(server.base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const t = await res.text();
  check(res.status === 200, `status ${res.status} for a ${size}-byte body: ${t.slice(0, 200)}`);
  const j = JSON.parse(t);
  check(j.choices?.length === 1 && FINISH.has(j.choices[0].finish_reason), `bad completion ${t.slice(0, 200)}`);
  return 'ok';
}

async function largeOver() {
  const size = opt.maxRequestBytes + randInt(1, opt.maxRequestBytes >> 1);
  const body = paddedBody(size);
  const chunked = rand() < 0.4;
  let parts;
  if (!chunked) parts = [head('/v1/completions', `Content-Length: ${size}\r\n`), body];
  else {
    parts = [head('/v1/completions', 'Transfer-Encoding: chunked\r\n')];
    for (let i = 0; i < size; i += 65536) {
      const piece = body.slice(i, i + 65536);
      parts.push(`${piece.length.toString(16)}\r\n${piece}\r\n`);
    }
    parts.push('0\r\n\r\n');
  }
  const r = await rawExchange(parts);
  check(r.response, `no response to a ${size}-byte ${chunked ? 'chunked' : 'Content-Length'} body (${r.error ?? (r.timedOut ? 'timeout' : 'closed')})`);
  checkErrorBody(r.response.status, r.response.body, 413);
  return 'expectedError';
}

// Raw sockets that go away: mid-stream (after the first SSE event) or mid-body.
async function rawDisconnect() {
  if (rand() < 0.6) {
    const body = JSON.stringify({ model: MODEL_ID, prompt: text(randInt(1, 40)), max_tokens: randInt(50, 300), ignore_eos: true, stream: true });
    const r = await rawExchange([head('/v1/completions', `Content-Length: ${Buffer.byteLength(body)}\r\n`), body],
      { stopWhen: (b) => b.includes('data: ') });
    check(!r.timedOut && r.raw.startsWith('HTTP/1.1 200'), `stream did not start: ${r.raw.slice(0, 200)}`);
    return 'cancelled';
  }
  const body = JSON.stringify({ model: MODEL_ID, prompt: text(40), max_tokens: 10 });
  const r = await rawExchange([head('/v1/completions', `Content-Length: ${body.length + 500}\r\n`), body.slice(0, randInt(1, body.length)),
    async (sock) => { await sleep(randInt(0, 50)); sock.destroy(); }]);
  check(!r.response, `a response to half a body: ${r.raw.slice(0, 200)}`);
  return 'cancelled';
}

async function misc() {
  const which = randInt(0, 3);
  if (which === 0) {
    const m = await api().models.list();
    check(m.data.length >= 1, 'no models');
  } else if (which === 1) {
    const r = await fetch(server.base + '/tokenize', { method: 'POST', body: JSON.stringify({ prompt: text(randInt(1, 30)) }) });
    const j = await r.json();
    check(r.status === 200 && Array.isArray(j.tokens), `tokenize ${r.status}`);
    const d = await fetch(server.base + '/detokenize', { method: 'POST', body: JSON.stringify({ tokens: j.tokens }) });
    check(d.status === 200 && typeof (await d.json()).prompt === 'string', `detokenize ${d.status}`);
  } else if (which === 2) {
    check((await fetch(server.base + '/health')).status === 200, 'health');
  } else {
    check((await fetch(server.base + '/v1/models')).status === 200, 'models');
  }
  return 'ok';
}

const KINDS = [
  ['chat', 14, () => chatOnce(false)],
  ['chat_stream', 14, () => chatOnce(true)],
  ['completion', 12, () => completionOnce(false)],
  ['completion_stream', 12, () => completionOnce(true)],
  ['cancel_stream', 10, cancelStream],
  ['cancel_nonstream', 5, cancelNonStream],
  ['raw_disconnect', 5, rawDisconnect],
  ['bad_input', 14, badInput],
  ['large_ok', 3, largeOk],
  ['large_413', 3, largeOver],
  ['misc', 4, misc],
];
if (opt.kinds) { const keep = opt.kinds.split(','); for (let i = KINDS.length - 1; i >= 0; --i) if (!keep.includes(KINDS[i][0])) KINDS.splice(i, 1); }
const totalWeight = KINDS.reduce((a, k) => a + k[1], 0);
function drawKind() {
  let x = rand() * totalWeight;
  for (const k of KINDS) if ((x -= k[1]) < 0) return k;
  return KINDS[0];
}

// ---- workers ----
let stopping = false;
let ourShutdown = false;   // set before the final SIGTERM: that exit is not a crash
let paused = null;          // a promise while traffic is paused
let inFlight = 0;
async function worker() {
  while (!stopping && !crashed) {
    if (paused) { await paused; continue; }
    const [kind, , fn] = drawKind();
    ++inFlight;
    // Each request is bounded: the SDK / fetch calls get --request-timeout from their own options
    // or from this race, so a hung request is counted, never waited for forever.
    let timer;
    const st = { phase: '' };
    const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Unexpected(`no answer within ${opt.requestTimeout} s${st.phase ? ` (${st.phase})` : ''}`)), opt.requestTimeout * 1000 + 5000); });
    try {
      const outcome = await Promise.race([fn(st), timeout]);
      count(kind, outcome ?? 'ok');
    } catch (e) {
      const msg = e instanceof Unexpected ? e.message : `${e.constructor?.name}: ${e.status ?? ''} ${e.message}`.slice(0, 300);
      count(kind, 'unexpected', msg);
    } finally { clearTimeout(timer); --inFlight; }
  }
}

async function waitIdle(limitS) {
  const t = now();
  let m = null;
  while (now() - t < limitS) {
    try {
      m = await readMetrics();
      if (m.running === 0 && m.waiting === 0 && m.kvUsed === 0) return m;
    } catch { /* retried */ }
    await sleep(250);
  }
  return m;
}

// Idle RSS: the median of 5 reads, 200 ms apart.
async function idleRss() {
  const xs = [];
  for (let i = 0; i < 5; ++i) { xs.push(rssKb(server.pid)); await sleep(200); }
  return xs.sort((a, b) => a - b)[2];
}

function idleHook(label) {
  if (!opt.idleHook || !server.pid) return;
  try {
    execSync(opt.idleHook, { stdio: 'inherit', timeout: 60_000,
      env: { ...process.env, SOAK_PID: String(server.pid), SOAK_T: String(Math.round(elapsed())), SOAK_LABEL: label, SOAK_OUT: opt.out } });
  } catch (e) { log(`idle hook failed: ${e.message}`); }
}

// ---- main ----
if (!opt.out) opt.out = fs.mkdtempSync('/tmp/moeserve-soak-');
fs.mkdirSync(opt.out, { recursive: true });
const hard = setTimeout(() => {
  console.log(`HARD TIMEOUT after ${opt.hardTimeout} s: stopping`);
  if (server?.proc) server.proc.kill('SIGKILL');
  process.exit(3);
}, opt.hardTimeout * 1000);
hard.unref();

server = await startServer();
if (server.proc) {
  server.exited.then(({ code, signal }) => {
    if (!ourShutdown) crashed ??= `server exited (code ${code}, signal ${signal}) at ${elapsed().toFixed(0)} s`;
  });
}
MODEL_ID = (await (await fetch(server.base + '/v1/models')).json()).data[0].id;
const samples = [];
let healthFailures = 0;
let sampling_ = true;
const sampler = (async () => {
  while (sampling_) {
    const s = { t: Math.round(elapsed()), rssKb: server.pid ? rssKb(server.pid) : NaN, inFlight };
    try { Object.assign(s, await readMetrics()); healthFailures = 0; } catch (e) {
      s.error = String(e.message);
      if (++healthFailures >= 3 && !server.proc) crashed ??= `/metrics failed 3 times in a row at ${elapsed().toFixed(0)} s`;
    }
    if (server.proc && server.proc.exitCode === null && server.proc.signalCode === null && server.pid && Number.isNaN(s.rssKb)) crashed ??= 'server process gone';
    samples.push(s);
    if (samples.length % Math.max(1, Math.round(60 / opt.sampleEvery)) === 1) {
      const tot = [...stats.values()].reduce((a, x) => a + x.ok + x.expectedError + x.cancelled + x.unexpected, 0);
      const unexp = [...stats.values()].reduce((a, x) => a + x.unexpected, 0);
      log(`rss ${(s.rssKb / 1024).toFixed(1)} MB, kv ${s.kvUsed}/${s.kvTotal}, running ${s.running}, waiting ${s.waiting}, in flight ${inFlight}, requests ${tot} (${unexp} unexpected)`);
    }
    await sleep(opt.sampleEvery * 1000);
  }
})();
if (opt.killServerAt > 0 && server.proc) {
  setTimeout(() => { log('self-test: SIGKILL to the server'); server.proc.kill('SIGKILL'); }, opt.killServerAt * 1000).unref();
}

log(`soak: ${opt.duration} s at concurrency ${opt.concurrency}, seed ${opt.seed}, out ${opt.out}`);
const tStart = now();
const workers = Array.from({ length: opt.concurrency }, () => worker());

// Warm-up, then the idle baseline; then an idle check (pause, idle RSS, KV blocks 0) at each
// further --idle-checks'th of the run, so the RSS curve shows a plateau or a trend.
const warmupS = opt.duration * opt.warmupFrac;
const idleChecks = [];   // {t, rssKb, kvUsed}
let idlePoints = 0;      // for --idle-hook's labels: 00 is the warm-up pause, 01 the baseline
async function pauseAndMeasure() {
  let release;
  paused = new Promise((r) => { release = r; });
  while (inFlight > 0 && !crashed) await sleep(100);
  const m = crashed ? null : await waitIdle(60);
  const c = { t: Math.round(elapsed()), rssKb: server.pid ? await idleRss() : NaN, kvUsed: m?.kvUsed, running: m?.running, waiting: m?.waiting };
  idleChecks.push(c);
  idleHook(`idle-${String(idlePoints++).padStart(2, '0')}`);
  if (m && m.kvUsed !== 0) fail(`KV blocks in use at the idle check at ${c.t} s: ${m.kvUsed}`);
  paused = null;
  release();
  return { c, m };
}
// The warm-up holds one pause too: when a pause ends, every worker sends at once, a burst of
// --concurrency simultaneous arrivals that steady traffic never makes. Its one-time costs
// (request and prompt buffers of that many requests at once in the malloc arenas, code paths
// first run) belong before the baseline, not in the drift: the 1800 s run of stop 16 stepped
// +30 MB in the second after its first idle check ended, then stayed flat.
while (now() - tStart < warmupS / 2 && !crashed) await sleep(500);
if (!crashed) {
  const { c } = await pauseAndMeasure();
  idleChecks.pop();
  log(`warm-up pause: rss ${(c.rssKb / 1024).toFixed(1)} MB, kv used ${c.kvUsed}`);
}
while (now() - tStart < warmupS && !crashed) await sleep(500);
const { c: baseline, m: idleBase } = await pauseAndMeasure();
log(`baseline (idle after ${warmupS.toFixed(0)} s of warm-up): rss ${(baseline.rssKb / 1024).toFixed(1)} MB, kv used ${idleBase?.kvUsed}`);
const step = (opt.duration - warmupS) / Math.max(1, opt.idleChecks);
for (let k = 1; k < opt.idleChecks && !crashed; ++k) {
  while (now() - tStart < warmupS + k * step && !crashed) await sleep(500);
  if (crashed) break;
  const { c } = await pauseAndMeasure();
  log(`idle check: rss ${(c.rssKb / 1024).toFixed(1)} MB, kv used ${c.kvUsed}`);
}

while (now() - tStart < opt.duration && !crashed) await sleep(500);
stopping = true;
log('traffic stops; waiting for in-flight requests');
await Promise.all(workers);
const trafficS = now() - tStart;
let endMetrics = crashed ? null : await waitIdle(120);
if (opt.inflightAtCheck && !crashed) {
  log('self-test: a request in flight while KV blocks are read');
  const ctl = new AbortController();
  const res = await fetch(server.base + '/v1/completions', { method: 'POST', signal: ctl.signal,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL_ID, prompt: text(50), max_tokens: 800, ignore_eos: true, stream: true }) });
  const reader = res.body.getReader();
  await reader.read();   // the stream has started: its sequence holds KV blocks
  endMetrics = await readMetrics();
  ctl.abort();
}
const endRss = server.pid && !crashed ? await idleRss() : NaN;
if (!crashed) idleHook('end');
sampling_ = false;
await sampler;

// Shutdown: SIGTERM, expect exit 0.
let shutdown = 'not ours';
if (server.proc && !crashed) {
  ourShutdown = true;
  server.proc.kill('SIGTERM');
  const r = await Promise.race([server.exited, sleep(60000).then(() => null)]);
  shutdown = r ? `exit code ${r.code}${r.signal ? ', signal ' + r.signal : ''}` : 'did not exit within 60 s';
  if (!r || r.code !== 0) fail(`shutdown on SIGTERM: ${shutdown}`);
  if (!r) server.proc.kill('SIGKILL');
}

// ---- checks and report ----
if (crashed) fail(`crash: ${crashed}`);
if (!endMetrics) fail('no /metrics at the end');
else {
  if (endMetrics.kvUsed !== 0) fail(`KV blocks in use when idle at the end: ${endMetrics.kvUsed} (of ${endMetrics.kvTotal})`);
  if (endMetrics.running !== 0 || endMetrics.waiting !== 0) fail(`requests still running ${endMetrics.running} / waiting ${endMetrics.waiting} at the end`);
}
let driftPct = NaN;
if (server.pid && !crashed) {
  driftPct = (endRss - baseline.rssKb) / baseline.rssKb * 100;
  if (!(driftPct < opt.maxRssDriftPct)) fail(`idle RSS drift ${driftPct.toFixed(2)}% >= ${opt.maxRssDriftPct}% (${baseline.rssKb} -> ${endRss} kB)`);
}
let totals = { ok: 0, expectedError: 0, cancelled: 0, unexpected: 0 };
for (const s of stats.values()) for (const k in totals) totals[k] += s[k];
if (totals.unexpected > 0) fail(`${totals.unexpected} unexpected responses`);
const all = totals.ok + totals.expectedError + totals.cancelled + totals.unexpected;
if (all === 0) fail('no requests at all');
// Every kind must have been exercised (a kind that never ran checked nothing).
for (const [kind] of KINDS) if (!crashed && !(stats.get(kind)?.ok + stats.get(kind)?.expectedError + stats.get(kind)?.cancelled > 0)) fail(`kind ${kind} never completed`);

const loaded = samples.filter((s) => s.t > warmupS && Number.isFinite(s.rssKb));
const peakRss = samples.reduce((a, s) => Math.max(a, s.rssKb || 0), 0);
const lastMetrics = samples.filter((s) => Number.isFinite(s.genTokens)).at(-1) ?? {};
const pad = (s, n) => String(s).padEnd(n);
const padl = (s, n) => String(s).padStart(n);
console.log('\n== soak summary ==');
console.log(`${pad('kind', 18)}${padl('ok', 9)}${padl('exp.error', 11)}${padl('cancelled', 11)}${padl('unexpected', 12)}`);
for (const [kind] of KINDS) {
  const s = stats.get(kind) ?? { ok: 0, expectedError: 0, cancelled: 0, unexpected: 0 };
  console.log(`${pad(kind, 18)}${padl(s.ok, 9)}${padl(s.expectedError, 11)}${padl(s.cancelled, 11)}${padl(s.unexpected, 12)}`);
}
console.log(`${pad('total', 18)}${padl(totals.ok, 9)}${padl(totals.expectedError, 11)}${padl(totals.cancelled, 11)}${padl(totals.unexpected, 12)}`);
console.log(`traffic ${trafficS.toFixed(0)} s at concurrency ${opt.concurrency}: ${all} requests (${(all / trafficS).toFixed(1)}/s); ` +
  `${lastMetrics.promptTokens} prompt / ${lastMetrics.genTokens} generated tokens, ${lastMetrics.preemptions} preemptions`);
console.log(`crashes: ${crashed ? 1 : 0}${crashed ? ' (' + crashed + ')' : ''}; shutdown: ${shutdown}`);
console.log(`KV blocks in use when idle: baseline ${idleBase?.kvUsed}, end ${endMetrics?.kvUsed} (of ${endMetrics?.kvTotal})`);
console.log(`RSS idle: baseline ${(baseline.rssKb / 1024).toFixed(1)} MB at ${baseline.t} s, end ${(endRss / 1024).toFixed(1)} MB, ` +
  `drift ${driftPct.toFixed(2)}% (limit ${opt.maxRssDriftPct}%); peak under load ${(peakRss / 1024).toFixed(1)} MB; ` +
  `${loaded.length} samples every ${opt.sampleEvery} s`);
console.log(`RSS idle checks: ${idleChecks.map((c) => `${c.t}s ${(c.rssKb / 1024).toFixed(1)} MB`).join(', ')}, end ${(endRss / 1024).toFixed(1)} MB`);
if (examples.length) { console.log('unexpected (first ones):'); for (const e of examples) console.log('  ' + e); }
const report = { opt, stats: Object.fromEntries(stats), totals, trafficS, crashed, shutdown, baseline, endRss, driftPct,
  endMetrics, idleChecks, peakRss, examples, violations, samples };
fs.writeFileSync(path.join(opt.out, 'soak.json'), JSON.stringify(report, null, 1));
console.log(`samples and report: ${path.join(opt.out, 'soak.json')}${server.logFile ? ', server log: ' + server.logFile : ''}`);
console.log(violations.length ? `FAIL: ${violations.length} violation(s):\n  ${violations.join('\n  ')}` : 'PASS');
process.exit(violations.length ? 1 : 0);
