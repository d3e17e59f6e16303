// Structured outputs through the server on the bundled model (models/minimax-m2-tiny) at
// temperature 1.0 with several seeds, streamed and not, on /v1/chat/completions and
// /v1/completions: every output of 60+ JSON schemas parses and validates with an independent
// validator (ajv + ajv-formats), every regex output fully matches, choice and GBNF outputs are in
// their language, every spelling of a constraint is honoured, each unsupported feature is a 400,
// and the official client's chat.completions.parse round-trips. A finish_reason "length" is a
// failure: the schemas are bounded so a sampled reply always fits max_tokens.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startServer, test, run, post, parseSse } from './harness.mjs';
import { SCHEMAS, REGEXES, CHOICES, GRAMMARS, REFUSED } from './structured_cases.mjs';

const require = createRequire(path.join(process.env.MOESERVE_NODE_MODULES || '.', 'x.js'));
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

// The reasoning parser is off here: the constraint applies from the first token (the reasoning
// test below starts a server with it on).
const COMMON = ['--served-model-name', 'model', '--kv-cache-memory', String(64 << 20), '--max-model-len', '1024', '--threads', '2',
  '--max-num-seqs', '32'];
const s = await startServer([...COMMON, '--reasoning-parser', 'none']);
const client = s.client();
const MAX_TOKENS = 700;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// Runs `jobs` (functions returning promises) at most `width` at a time (the engine batches
// them); fails listing every job that failed, not only the first.
async function pool(jobs, width = 16) {
  const results = new Array(jobs.length);
  const failures = [];
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) {
      const i = next++;
      try {
        results[i] = await jobs[i]();
      } catch (e) {
        failures.push(e.message);
      }
    }
  }));
  assert.equal(failures.length, 0, `${failures.length} of ${jobs.length} requests failed:\n` + failures.join('\n'));
  return results;
}

// One request; returns [{text, finish}] per choice. `route`: 'chat' or 'completions'.
async function generate(route, constraint, { stream = false, n = 1, seed = 1, prompt = 'Answer in the requested format.' } = {}) {
  const base = { model: 'model', max_tokens: MAX_TOKENS, temperature: 1.0, seed, n, ...constraint };
  const out = Array.from({ length: n }, () => ({ text: '', finish: null }));
  if (route === 'chat') {
    const body = { ...base, messages: [{ role: 'user', content: prompt }] };
    if (!stream) {
      const r = await client.chat.completions.create(body);
      return r.choices.map((c) => ({ text: c.message.content ?? '', finish: c.finish_reason }));
    }
    for await (const ch of await client.chat.completions.create({ ...body, stream: true })) {
      for (const c of ch.choices) {
        out[c.index].text += c.delta?.content ?? '';
        out[c.index].finish = c.finish_reason ?? out[c.index].finish;
      }
    }
    return out;
  }
  const body = { ...base, prompt: 'Question: ' + prompt + '\nAnswer: ' };
  if (!stream) {
    const r = await client.completions.create(body);
    return r.choices.map((c) => ({ text: c.text, finish: c.finish_reason }));
  }
  for await (const ch of await client.completions.create({ ...body, stream: true })) {
    for (const c of ch.choices) {
      out[c.index].text += c.text ?? '';
      out[c.index].finish = c.finish_reason ?? out[c.index].finish;
    }
  }
  return out;
}

function checkFinish(outputs, what) {
  for (const o of outputs)
    assert.equal(o.finish, 'stop', `${what}: finish_reason ${o.finish} after ${JSON.stringify(o.text.slice(-80))}`);
}

// The spellings of a JSON Schema constraint, rotated over the cases so each is used on both
// routes.
const JSON_SPELLINGS = [
  (schema) => ({ response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } } }),
  (schema) => ({ structured_outputs: { json: schema } }),
  (schema) => ({ guided_json: schema }),
  (schema) => ({ json_schema: schema }),
  (schema) => ({ guided_json: JSON.stringify(schema) }),
  (schema) => ({ response_format: { type: 'json_object', schema } }),
  (schema) => ({ structured_outputs: { json: schema, disable_any_whitespace: true } }),
];

test(`${SCHEMAS.length} JSON schemas: every output parses and validates (chat and completions, streamed and not, several seeds)`, async () => {
  assert.ok(SCHEMAS.length >= 60);
  const jobs = [];
  SCHEMAS.forEach(([name, schema], i) => {
    const validate = ajv.compile(schema);
    const constraint = JSON_SPELLINGS[i % JSON_SPELLINGS.length](schema);
    const prompt = `Give a ${name} as JSON.`;
    const runs = [
      ['chat', { n: 2, seed: 100 + i, prompt }],
      ['chat', { stream: true, seed: 200 + i, prompt }],
      ['completions', { stream: i % 2 === 0, seed: 300 + i, prompt }],
    ];
    for (const [route, opts] of runs) {
      jobs.push(async () => {
        const what = `schema '${name}' (${route}${opts.stream ? ', streamed' : ''}, seed ${opts.seed}, ${Object.keys(constraint)[0]})`;
        const outputs = await generate(route, constraint, opts);
        checkFinish(outputs, what);
        for (const o of outputs) {
          let value;
          try { value = JSON.parse(o.text); } catch (e) { assert.fail(`${what}: not JSON: ${JSON.stringify(o.text)}`); }
          assert.ok(validate(value), `${what}: ${ajv.errorsText(validate.errors)} in ${o.text}`);
          if (opts.n === undefined && constraint.structured_outputs?.disable_any_whitespace)
            assert.ok(!/[\n\t]/.test(o.text), `${what}: whitespace in compact JSON`);
        }
        return outputs.length;
      });
    }
  });
  const counts = await pool(jobs);
  console.log(`     ${counts.reduce((a, b) => a + b, 0)} outputs validated`);
});

// Whether `text` is the beginning of a JSON text: JSON.parse fails only at its very end.
function isJsonPrefix(text) {
  try { JSON.parse(text); return true; } catch (e) {
    if (/end of JSON input/.test(e.message)) return true;
    const at = e.message.match(/at position (\d+)/);
    return at !== null && Number(at[1]) >= text.length;
  }
}

// json_object bounds nothing (any object, strings of any length): a sampled reply may run past
// max_tokens. Those replies must still be the beginning of a JSON object; the others, one.
test('json_object (OpenAI and vLLM spellings): a JSON object, or the start of one when cut by max_tokens', async () => {
  const jobs = [];
  const spellings = [{ response_format: { type: 'json_object' } }, { structured_outputs: { json_object: true } }];
  for (const [k, constraint] of spellings.entries())
    for (const route of ['chat', 'completions'])
      for (const stream of [false, true])
        jobs.push(async () => {
          const outputs = await generate(route, constraint, { stream, seed: 40 + k, n: 2, prompt: 'Describe a cat as a JSON object.' });
          for (const o of outputs) {
            assert.ok(o.text.trimStart().startsWith('{'), o.text);
            if (o.finish === 'length') {
              assert.ok(isJsonPrefix(o.text), `json_object ${route}: not a JSON prefix: ${o.text}`);
              continue;
            }
            assert.equal(o.finish, 'stop');
            const v = JSON.parse(o.text);
            assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), o.text);
          }
        });
  await pool(jobs);
});

test(`${REGEXES.length} regexes: every output fully matches (JavaScript equivalent)`, async () => {
  const spellings = [(re) => ({ guided_regex: re }), (re) => ({ structured_outputs: { regex: re } })];
  const jobs = [];
  REGEXES.forEach(([re, js], i) => {
    for (const [route, opts] of [['chat', { n: 2, seed: 500 + i }], ['completions', { stream: true, seed: 600 + i }], ['chat', { stream: true, seed: 700 + i }]]) {
      jobs.push(async () => {
        const outputs = await generate(route, spellings[i % 2](re), { ...opts, prompt: 'Write one value.' });
        checkFinish(outputs, `regex ${re}`);
        for (const o of outputs) assert.ok(js.test(o.text), `regex ${re} (${route}): ${JSON.stringify(o.text)} does not match`);
      });
    }
  });
  await pool(jobs);
});

test('choice: every output is one of the choices', async () => {
  const spellings = [(c) => ({ guided_choice: c }), (c) => ({ structured_outputs: { choice: c } })];
  const jobs = [];
  CHOICES.forEach((choices, i) => {
    for (const [route, opts] of [['chat', { n: 3, seed: 800 + i }], ['completions', { n: 2, seed: 900 + i, stream: true }]]) {
      jobs.push(async () => {
        const outputs = await generate(route, spellings[i % 2](choices), { ...opts, prompt: 'Pick one.' });
        checkFinish(outputs, `choice ${choices}`);
        for (const o of outputs) assert.ok(choices.includes(o.text), `${JSON.stringify(o.text)} not in ${choices}`);
      });
    }
  });
  await pool(jobs);
});

test('GBNF (vLLM and llama.cpp spellings): every output is in the grammar\'s language', async () => {
  const spellings = [(g) => ({ guided_grammar: g }), (g) => ({ structured_outputs: { grammar: g } }), (g) => ({ grammar: g })];
  const jobs = [];
  GRAMMARS.forEach(([gbnf, check], i) => {
    for (const [route, opts] of [['chat', { n: 2, seed: 1000 + i }], ['completions', { stream: true, n: 2, seed: 1100 + i }]]) {
      jobs.push(async () => {
        const outputs = await generate(route, spellings[i % 3](gbnf), { ...opts, prompt: 'Write one value.' });
        checkFinish(outputs, `grammar ${i}`);
        for (const o of outputs) assert.ok(check(o.text), `grammar ${i} (${route}): ${JSON.stringify(o.text)}`);
      });
    }
  });
  await pool(jobs);
});

test('response_format text and null constrain nothing', async () => {
  for (const rf of [{ type: 'text' }, null]) {
    const r = await post(s.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5,
      response_format: rf, seed: 1 });
    assert.equal(r.status, 200, r.text);
  }
});

test('each unsupported feature is a 400 naming it (both routes, streamed or not)', async () => {
  for (const [what, fields, mention] of REFUSED) {
    for (const [route, base] of [['/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }] }],
      ['/v1/completions', { prompt: 'Hi' }]]) {
      for (const stream of [false, true]) {
        const r = await post(s.base, route, { ...base, ...fields, max_tokens: 5, stream });
        assert.equal(r.status, 400, `${what} on ${route}: ${r.status} ${r.text}`);
        assert.equal(r.json?.error?.type, 'invalid_request_error', r.text);
        assert.ok(r.json.error.message.includes(mention), `${what}: '${r.json.error.message}' does not name ${mention}`);
      }
    }
  }
});

test('openai client chat.completions.parse with a JSON schema round-trips', async () => {
  const schema = SCHEMAS.find(([name]) => name === 'person')[1];
  const validate = ajv.compile(schema);
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({ model: 'model', messages: [{ role: 'user', content: 'A person.' }],
      max_tokens: MAX_TOKENS, temperature: 1.0, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.deepEqual(m.parsed, JSON.parse(m.content));
    assert.ok(validate(m.parsed), ajv.errorsText(validate.errors));
  }
});

test('reasoning parser active: the model thinks freely, the answer after </think> follows the schema', async () => {
  const r = await startServer([...COMMON]);
  try {
    const schema = SCHEMAS.find(([name]) => name === 'sentiment')[1];
    const validate = ajv.compile(schema);
    const c = r.client();
    let reasoned = 0;
    for (const seed of [1, 2, 3, 4]) {
      const body = { model: 'model', messages: [{ role: 'user', content: 'Natalia sold 48 clips. Is that good?' }],
        max_tokens: MAX_TOKENS, temperature: 1.0, seed, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } };
      const full = await c.chat.completions.create(body);
      const m = full.choices[0].message;
      assert.equal(full.choices[0].finish_reason, 'stop', JSON.stringify(m));
      assert.ok(validate(JSON.parse(m.content)), m.content);
      if (m.reasoning_content) ++reasoned;
      let content = '', reasoning = '';
      for await (const ch of await c.chat.completions.create({ ...body, stream: true })) {
        content += ch.choices[0]?.delta?.content ?? '';
        reasoning += ch.choices[0]?.delta?.reasoning_content ?? '';
      }
      assert.equal(content, m.content, 'streamed == non-streamed (same seed)');
      assert.equal(reasoning, m.reasoning_content ?? '');
    }
    assert.ok(reasoned > 0, 'the reasoning was not constrained (it holds free text)');
  } finally {
    await r.stop();
  }
});

await run(async () => { await s.stop(); });
