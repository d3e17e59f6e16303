// Shared helpers of the server tests: start `moeserve serve` on a free port, wait for /health,
// a minimal test runner, and SSE/HTTP helpers. Environment (set by CTest):
//   MOESERVE_BIN      the moeserve binary
//   MOESERVE_MODEL    the test model folder (tiny random MiniMax-M2 + small BPE tokenizer)
//   MOESERVE_NODE_MODULES  node_modules with the `openai` package
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';

export const BIN = process.env.MOESERVE_BIN;
export const MODEL = process.env.MOESERVE_MODEL;
const require = createRequire(path.join(process.env.MOESERVE_NODE_MODULES || '.', 'x.js'));
export const OpenAI = require('openai').default ?? require('openai');

// `moeserve serve --model MODEL --port 0 <args>`, once it answers /health.
export async function startServer(args, { env = {} } = {}) {
  return startMoeserve(['serve', '--model', MODEL, ...args], { env });
}

// `moeserve <argv> --port 0` (a command line given whole), once it answers /health.
export async function startMoeserve(argv, { env = {} } = {}) {
  const proc = spawn(BIN, [...argv, '--port', '0'], {
    env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/serving .* on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    proc.stderr.on('data', onData);
    proc.stdout.on('data', onData);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${log}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; ++i) {
    try { if ((await fetch(base + '/health')).status === 200) break; } catch { /* not yet */ }
    await sleep(50);
  }
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    proc, port, base, exited, log: () => log,
    client: (opts = {}) => new OpenAI({ baseURL: base + '/v1', apiKey: opts.apiKey ?? 'none', maxRetries: 0, ...opts }),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function post(base, route, body, headers = {}) {
  const res = await fetch(base + route, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or plain */ }
  return { status: res.status, text, json, headers: res.headers };
}

// Raw SSE: the list of parsed `data:` payloads (the string '[DONE]' kept as is).
export function parseSse(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    if (!block.startsWith('data: ')) throw new Error('bad SSE block: ' + JSON.stringify(block));
    const data = block.slice(6);
    events.push(data === '[DONE]' ? data : JSON.parse(data));
  }
  return events;
}

// Named SSE events (Anthropic, Responses): [{event, data}] with `data` parsed; an event whose name
// differs from its data's `type` is an error (both APIs name every event after its type).
export function parseNamedSse(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const lines = block.split('\n');
    if (!lines[0].startsWith('event: ') || !lines[1]?.startsWith('data: ') || lines.length !== 2)
      throw new Error('bad SSE block: ' + JSON.stringify(block));
    const event = lines[0].slice(7);
    const data = JSON.parse(lines[1].slice(6));
    if (data.type !== event) throw new Error(`event ${event} carries type ${data.type}`);
    events.push({ event, data });
  }
  return events;
}

// The require() of the server tests' node_modules, for other official clients.
export const requireModule = require;

// A tiny runner: test(name, fn); await run() exits non-zero on any failure.
const tests = [];
export function test(name, fn) { tests.push({ name, fn }); }
export async function run(cleanup = async () => {}) {
  let failed = 0;
  const only = process.env.TEST_FILTER;
  for (const t of tests) {
    if (only && !t.name.includes(only)) continue;
    const t0 = Date.now();
    try {
      await t.fn();
      console.log(`ok   ${t.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      ++failed;
      console.log(`FAIL ${t.name}: ${e.stack || e}`);
    }
  }
  await cleanup();
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed`);
  process.exit(failed ? 1 : 0);
}

// A file in a temporary folder of its own, removed when run() ends.
const tempDirs = [];
export function writeTemp(name, content) {
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR || '/tmp', 'moeserve-test-'));
  tempDirs.push(dir);
  const file = path.join(dir, name);
  fs.writeFileSync(file, content);
  return file;
}

export function rssKb(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]);
}

export function metricValue(text, name, labelFilter = '') {
  for (const line of text.split('\n')) {
    if (line.startsWith(name + '{') && line.includes(labelFilter)) return Number(line.split(' ').pop());
  }
  throw new Error(`metric ${name} not found`);
}

// Parses the complete HTTP/1.1 responses at the start of `buf` (a latin1 string): Content-Length,
// chunked and (when `closed`) close-delimited bodies. Returns {responses, rest}.
export function parseResponses(buf, closed = false) {
  const responses = [];
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) break;
    const lines = buf.slice(0, end).split('\r\n');
    const status = Number(lines[0].split(' ')[1]);
    const headers = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let rest = buf.slice(end + 4);
    let body = '';
    if (status < 200 || status === 204 || status === 304) {
      // no body
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length < n) break;
      body = rest.slice(0, n);
      rest = rest.slice(n);
    } else if ((headers['transfer-encoding'] || '').includes('chunked')) {
      let complete = false;
      for (;;) {
        const le = rest.indexOf('\r\n');
        if (le < 0) break;
        const size = parseInt(rest.slice(0, le), 16);
        if (rest.length < le + 2 + size + 2) break;
        body += rest.slice(le + 2, le + 2 + size);
        rest = rest.slice(le + 2 + size + 2);
        if (size === 0) { complete = true; break; }
      }
      if (!complete) break;
    } else {
      if (!closed) break;
      body = rest;
      rest = '';
    }
    responses.push({ status, headers, body });
    buf = rest;
  }
  return { responses, rest: buf };
}

// Opens a raw TCP connection, writes `data` (a string or Buffer, or a list of them written one
// after another), and collects responses until `count` are complete, the server closes, or
// `timeoutMs` passes. Returns {responses, closed, timedOut, error, raw}.
export function rawExchange(port, data, { count = 1, timeoutMs = 10000 } = {}) {
  return new Promise((resolve) => {
    let buf = '';
    let done = false;
    const sock = net.connect(port, '127.0.0.1');
    const finish = (extra) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const closed = extra.closed ?? false;
      const { responses } = parseResponses(buf, closed);
      sock.destroy();
      resolve({ responses, closed, timedOut: false, error: null, raw: buf, ...extra });
    };
    const timer = setTimeout(() => finish({ timedOut: true }), timeoutMs);
    sock.on('connect', () => { for (const d of [].concat(data)) sock.write(d); });
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      if (parseResponses(buf).responses.length >= count) finish({});
    });
    sock.on('end', () => finish({ closed: true }));
    sock.on('close', () => finish({ closed: true }));
    sock.on('error', (e) => finish({ closed: true, error: e }));
  });
}
