// Resident memory of `moeserve serve` before and after bursts of large requests, each on a new
// connection (issue 14: glibc arenas kept every burst's peak). Prints kB figures; checks nothing.
//   node bench/serve/rss_burst.mjs BIN MODEL_DIR [serve flags...]
// e.g. node bench/serve/rss_burst.mjs build/src/apps/moeserve models/minimax-m2-tiny --kv-cache-memory 268435456
import { spawn } from 'node:child_process';
import fs from 'node:fs';

const [bin, model, ...flags] = process.argv.slice(2);
const ROUNDS = 4, CONCURRENCY = 8;
const proc = spawn(bin, ['serve', '--model', model, '--port', '0', ...flags], { stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
const port = await new Promise((resolve, reject) => {
  const onData = (d) => {
    log += d;
    const m = log.match(/serving .* on http:\/\/[^:]+:(\d+)/);
    if (m) resolve(Number(m[1]));
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  proc.on('exit', (c) => reject(new Error(`server exited ${c}:\n${log}`)));
});
const base = `http://127.0.0.1:${port}`;
const rss = () => Number(fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// ~5 MB: 2000 messages of 2.5 KB, far over max_model_len, so no tokens are generated.
const big = JSON.stringify({ messages: Array.from({ length: 2000 }, () => ({ role: 'user', content: 'word '.repeat(500) })) });
const send = () => fetch(base + '/v1/chat/completions', { method: 'POST', body: big,
  headers: { 'content-type': 'application/json', connection: 'close' } }).then((r) => r.text());
await fetch(base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ prompt: 'Hi', max_tokens: 4 }) });
await sleep(500);
const idle = rss();
const after = [];
for (let r = 0; r < ROUNDS; ++r) {
  await Promise.all(Array.from({ length: CONCURRENCY }, send));
  await sleep(500);
  after.push(rss());
}
console.log(`idle ${idle} kB; after each burst of ${CONCURRENCY} x ${(big.length / 1e6).toFixed(1)} MB: ${after.join(', ')} kB ` +
  `(+${((after.at(-1) - idle) / 1024).toFixed(1)} MB, ${(100 * (after.at(-1) - idle) / idle).toFixed(1)}% of idle)`);
proc.kill('SIGTERM');
