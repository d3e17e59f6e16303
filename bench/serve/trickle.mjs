// Slow-client benchmark: latency of normal requests (p50 / p99) on an idle server, then while N
// connections trickle a request head one byte per second (issue 14: such clients used to hold every
// HTTP thread). Starts `moeserve serve` with the scripted engine on the server tests' model.
//   node bench/serve/trickle.mjs MODEL_DIR [TRICKLERS=1000] [REQUESTS=200]
// Environment: MOESERVE (binary, default build/src/apps/moeserve), PORT (default 18124).
// MODEL_DIR: any model folder with tokenizer files, e.g. build/fixtures/server/model.
// A request that gets no answer within 5 s counts as 5 s (and is reported as timed out).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const [model, nTricklers = '1000', nRequests = '200'] = process.argv.slice(2);
if (!model) { console.error('usage: node bench/serve/trickle.mjs MODEL_DIR [TRICKLERS] [REQUESTS]'); process.exit(2); }
const bin = process.env.MOESERVE || 'build/src/apps/moeserve';
const port = Number(process.env.PORT || 18124);
const base = `http://127.0.0.1:${port}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const reply = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'trickle-')), 'reply.txt');
fs.writeFileSync(reply, 'The answer is 42.');
const server = spawn(bin, ['serve', '--model', model, '--port', String(port), '--scripted-output', reply],
  { stdio: 'ignore' });
for (let i = 0; i < 200; ++i) {
  try { if ((await fetch(base + '/health')).status === 200) break; } catch { /* not yet */ }
  await sleep(100);
}

async function timedRequest() {
  const t0 = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 5000);
  try {
    const res = await fetch(base + '/v1/completions', { method: 'POST', signal: ac.signal,
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Hi', max_tokens: 4 }) });
    await res.text();
    return { ms: performance.now() - t0, ok: res.status === 200 };
  } catch {
    return { ms: 5000, ok: false };
  } finally { clearTimeout(timer); }
}

async function measure(label) {
  const ms = [];
  let failed = 0;
  for (let i = 0; i < Number(nRequests); ++i) {
    const r = await timedRequest();
    ms.push(r.ms);
    if (!r.ok) ++failed;
  }
  ms.sort((a, b) => a - b);
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(1);
  console.log(`${label}: ${ms.length} requests, p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, failed/timed out ${failed}`);
}

await measure('idle');
const status0 = fs.readFileSync(`/proc/${server.pid}/status`, 'utf8');
console.log(`server idle: RSS ${(status0.match(/VmRSS:\s+(\d+)/)[1] / 1024).toFixed(1)} MB`);
const head = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(4000) + '\r\n\r\n';
const socks = [];
const connected = [];
for (let i = 0; i < Number(nTricklers); ++i) {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  s.sent = 0;
  socks.push(s);
  connected.push(new Promise((resolve) => { s.once('connect', resolve); s.once('close', resolve); }));
  if (i % 100 === 99) await sleep(20);
}
await Promise.race([Promise.all(connected), sleep(20000)]);
console.log(`tricklers connected: ${socks.filter((s) => !s.connecting && !s.destroyed).length}`);
const tick = () => { for (const s of socks) if (!s.destroyed) s.write(head[s.sent++ % head.length]); };
tick();
const timer = setInterval(tick, 1000);
await sleep(2000);
await measure(`${nTricklers} tricklers`);
console.log(`tricklers still open: ${socks.filter((s) => !s.destroyed && !s.readableEnded).length}`);
try {
  const rss = fs.readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1];
  const threads = fs.readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/Threads:\s+(\d+)/)[1];
  console.log(`server: RSS ${(rss / 1024).toFixed(1)} MB, ${threads} threads`);
} catch { /* not on Linux */ }
clearInterval(timer);
for (const s of socks) s.destroy();
server.kill('SIGTERM');
