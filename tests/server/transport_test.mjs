// The HTTP front through raw sockets: slow clients cannot starve it, size limits hold while
// reading (chunked bodies and header lines included), framing is strict, pipelined requests are
// answered in order, bursts of connects are all served, unknown methods get 405.
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, test, run, writeTemp, post, rssKb, rawExchange, sleep } from './harness.mjs';

const TEXT = 'Hello there! The answer is 42, said the machine.';
const s = await startServer(['--scripted-output', writeTemp('r.txt', TEXT)]);
const servers = [s];
const HEALTH = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';

function withTimeout(p, ms, what) {
  return Promise.race([p, sleep(ms).then(() => { throw new Error(`${what}: no answer within ${ms} ms`); })]);
}

// Opens `n` connections that send a request head one byte per second; resolves once all are
// connected. close() ends them.
async function tricklers(port, n) {
  const head = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(4000) + '\r\n\r\n';
  const socks = [];
  const connected = [];
  for (let i = 0; i < n; ++i) {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => {});
    sock.sent = 0;
    connected.push(new Promise((resolve) => sock.once('connect', resolve)));
    socks.push(sock);
    if (i % 100 === 99) await sleep(20);
  }
  await Promise.all(connected);
  const tick = () => { for (const sock of socks) if (!sock.destroyed) sock.write(head[sock.sent++ % head.length]); };
  tick();
  const timer = setInterval(tick, 1000);
  return {
    socks,
    open: () => socks.filter((x) => !x.destroyed && !x.readableEnded).length,
    close() { clearInterval(timer); for (const sock of socks) sock.destroy(); },
  };
}

test('1000 connections trickling a header byte per second: normal clients are still answered', async () => {
  const t = await startServer(['--scripted-output', writeTemp('r.txt', TEXT)]);
  const slow = await tricklers(t.port, 1000);
  try {
    await sleep(1500);
    assert.equal(slow.open(), 1000, 'the tricklers are still connected');
    for (let i = 0; i < 3; ++i) {
      const t0 = Date.now();
      const r = await withTimeout(t.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 5 }), 5000, 'completion');
      assert.equal(r.choices[0].finish_reason, 'length');
      const h = await withTimeout(fetch(t.base + '/health'), 5000, '/health');
      assert.equal(h.status, 200);
      assert.ok(Date.now() - t0 < 5000);
    }
    // SIGTERM is not held up by connections that never finish their request.
    const t0 = Date.now();
    t.proc.kill('SIGTERM');
    const { code } = await withTimeout(t.exited, 5000, 'exit after SIGTERM');
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 < 3000, `exited ${Date.now() - t0} ms after SIGTERM`);
  } finally { slow.close(); await t.stop(); }
});

test('the request head has one deadline, not one per byte', async () => {
  const t = await startServer(['--scripted-output', writeTemp('r.txt', TEXT), '--header-timeout', '2', '--body-timeout', '2']);
  servers.push(t);
  const slow = await tricklers(t.port, 3);
  const t0 = Date.now();
  await Promise.all(slow.socks.map((sock) => new Promise((resolve) => sock.once('close', resolve))));
  const took = Date.now() - t0;
  slow.close();
  assert.ok(took > 1500 && took < 4000, `closed after ${took} ms`);
  // The body has its own deadline.
  const r = await rawExchange(t.port, 'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro',
    { timeoutMs: 10000 });
  assert.ok(r.closed && !r.timedOut, 'a body that never completes is cut');
});

async function sendUntilAnswered(port, head, nextPiece, maxBytes, pid) {
  const rss0 = rssKb(pid);
  let rssMax = rss0;
  const sampler = setInterval(() => { try { rssMax = Math.max(rssMax, rssKb(pid)); } catch { /* gone */ } }, 20);
  const result = await new Promise((resolve) => {
    let buf = '';
    let sent = 0;
    let answered = false;
    const sock = net.connect(port, '127.0.0.1');
    const done = () => { if (!answered) { answered = true; sock.destroy(); resolve({ buf, sent }); } };
    sock.on('data', (d) => { buf += d.toString('latin1'); if (buf.includes('\r\n\r\n')) done(); });
    sock.on('error', done);
    sock.on('close', done);
    // One piece per turn of the event loop: when the server reads as fast as we write (its
    // lingering close drops what follows its answer), every write is taken at once and a loop of
    // writes would send everything before the answer's 'data' event could run.
    const pump = () => {
      if (answered || sent >= maxBytes) return;
      const piece = nextPiece();
      sent += piece.length;
      if (sock.write(piece)) setImmediate(pump); else sock.once('drain', pump);
    };
    sock.on('connect', () => { sock.write(head); pump(); });
  });
  clearInterval(sampler);
  rssMax = Math.max(rssMax, rssKb(pid));
  return { ...result, status: Number(result.buf.split(' ')[1]), rssGrowthMb: (rssMax - rss0) / 1024 };
}

test('a 300 MB chunked body -> 413 at the default 32 MB limit, RSS grows < 40 MB', async () => {
  const mb = Buffer.alloc(1 << 20, 'a');
  const chunk = Buffer.concat([Buffer.from('100000\r\n'), mb, Buffer.from('\r\n')]);
  const r = await sendUntilAnswered(s.port,
    'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    () => chunk, 300 << 20, s.proc.pid);
  console.log(`  chunked: ${r.status} after ${(r.sent / 1048576).toFixed(1)} MB sent, RSS +${r.rssGrowthMb.toFixed(1)} MB`);
  assert.equal(r.status, 413, r.buf.slice(0, 200));
  assert.ok(r.buf.includes('request_too_large'));
  assert.ok(r.rssGrowthMb < 40, `RSS grew ${r.rssGrowthMb} MB`);
  assert.ok(r.sent < 64 << 20, `answered after ${r.sent} bytes, not at the end`);
  assert.equal((await fetch(s.base + '/health')).status, 200);
});

test('a 200 MB header line -> 431 before it is buffered', async () => {
  const mb = Buffer.alloc(1 << 20, 'b');
  const r = await sendUntilAnswered(s.port, 'GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ', () => mb, 200 << 20, s.proc.pid);
  console.log(`  header line: ${r.status} after ${(r.sent / 1048576).toFixed(1)} MB sent, RSS +${r.rssGrowthMb.toFixed(1)} MB`);
  assert.equal(r.status, 431, r.buf.slice(0, 200));
  assert.ok(r.sent < 64 << 20, `answered after ${r.sent} bytes`);
  assert.ok(r.rssGrowthMb < 20, `RSS grew ${r.rssGrowthMb} MB`);
  // More than 100 header fields -> 431 as well; 100 are fine.
  const fields = (n) => Array.from({ length: n }, (_, i) => `X-F${i}: v\r\n`).join('');
  let x = await rawExchange(s.port, `GET /health HTTP/1.1\r\nHost: x\r\n${fields(100)}\r\n`);
  assert.equal(x.responses[0]?.status, 431);
  x = await rawExchange(s.port, `GET /health HTTP/1.1\r\nHost: x\r\n${fields(98)}\r\n`);
  assert.equal(x.responses[0]?.status, 200);
});

test('conflicting Content-Length, Content-Length with Transfer-Encoding -> 400 and close', async () => {
  const body = '{"prompt": "Hi"}';
  const cases = [
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nContent-Length: 3\r\n\r\n${body}`,
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n${body}\r\n0\r\n\r\n`,
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: ${body.length}\r\n\r\n10\r\n${body}\r\n0\r\n\r\n`,
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n${body}`,
  ];
  for (const c of cases) {
    const r = await rawExchange(s.port, c + HEALTH, { count: 2 });
    assert.equal(r.responses[0]?.status, 400, c);
    assert.ok(JSON.parse(r.responses[0].body).error.message.length > 0);
    assert.equal(r.responses.length, 1, 'nothing after a framing error is served');
    assert.ok(r.closed);
  }
  // A well-framed chunked body is fine.
  const r = await rawExchange(s.port, `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
  assert.equal(r.responses[0]?.status, 200);
});

test('PUT / PATCH / TRACE / DELETE / OPTIONS -> 405 with Allow; HEAD on GET routes', async () => {
  for (const m of ['PUT', 'PATCH', 'TRACE', 'DELETE', 'OPTIONS', 'BREW']) {
    for (const [path, allow] of [['/v1/completions', 'POST'], ['/health', 'GET, HEAD'], ['/nothing', 'GET, HEAD, POST']]) {
      const r = await rawExchange(s.port, `${m} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`);
      assert.equal(r.responses[0]?.status, 405, `${m} ${path}`);
      assert.equal(r.responses[0].headers.allow, allow, `${m} ${path}`);
      assert.ok(JSON.parse(r.responses[0].body).error);
    }
  }
  const r = await rawExchange(s.port, 'HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.ok(r.closed);
  assert.match(r.raw, /^HTTP\/1.1 200 /);
  assert.ok(Number(r.raw.match(/Content-Length: (\d+)/)[1]) > 0);
  assert.ok(r.raw.endsWith('\r\n\r\n'), 'no body after the head');
});

test('pipelined requests are answered in order', async () => {
  const body = '{"prompt": "Hello there", "add_special_tokens": false}';
  const cbody = '{"prompt": "Hi", "max_tokens": 2}';
  const reqs = [
    HEALTH,
    `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${cbody.length}\r\n\r\n${cbody}`,
    'GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
  ];
  const r = await rawExchange(s.port, reqs.join(''), { count: 4 });
  assert.deepEqual(r.responses.map((x) => x.status), [200, 200, 200, 200]);
  assert.equal(r.responses[0].body, '');
  assert.ok(JSON.parse(r.responses[1].body).tokens.length > 0);
  assert.equal(JSON.parse(r.responses[2].body).object, 'text_completion');
  assert.ok(JSON.parse(r.responses[3].body).version);
  // A pipelined request behind a stream waits for the stream to end.
  const sbody = '{"prompt": "Hi", "max_tokens": 3, "stream": true}';
  const stream = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${sbody.length}\r\n\r\n${sbody}`;
  const r2 = await rawExchange(s.port, stream + HEALTH, { count: 2 });
  assert.deepEqual(r2.responses.map((x) => x.status), [200, 200]);
  assert.ok(r2.responses[0].body.trimEnd().endsWith('data: [DONE]'));
});

test('300 simultaneous connects are all served', async () => {
  const results = await Promise.all(Array.from({ length: 300 }, () =>
    rawExchange(s.port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', { timeoutMs: 20000 })));
  const ok = results.filter((r) => r.responses[0]?.status === 200).length;
  const errors = results.filter((r) => r.error).map((r) => r.error.code);
  assert.equal(ok, 300, `${ok} of 300 served; errors: ${[...new Set(errors)].join(', ')}`);
});

test('--max-connections: one connection more is answered 503', async () => {
  const t = await startServer(['--scripted-output', writeTemp('r.txt', TEXT), '--max-connections', '4']);
  servers.push(t);
  const idle = [];
  for (let i = 0; i < 4; ++i) {
    const sock = net.connect(t.port, '127.0.0.1');
    sock.on('error', () => {});
    await new Promise((resolve) => sock.once('connect', resolve));
    idle.push(sock);
  }
  await sleep(100);
  const r = await rawExchange(t.port, HEALTH);
  assert.equal(r.responses[0]?.status, 503);
  for (const sock of idle) sock.destroy();
  await sleep(100);
  assert.equal((await rawExchange(t.port, HEALTH)).responses[0]?.status, 200);
});

test('Expect: 100-continue is honoured; the server still answers normally', async () => {
  const body = '{"prompt": "Hi"}';
  const r = await rawExchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`, body], { count: 2 });
  assert.equal(r.responses[0]?.status, 100);
  assert.equal(r.responses[1]?.status, 200);
  const c = await s.client().completions.create({ model: 'model', prompt: 'Hi', max_tokens: 100 });
  assert.equal(c.choices[0].text, TEXT);
  assert.equal((await post(s.base, '/tokenize', { prompt: 'Hi' })).status, 200);
});

await run(async () => { for (const x of servers) await x.stop(); });
