// The OpenAI Responses API (/v1/responses) through the official `openai` client (responses.create
// plain, streamed, with function tools; retrieve; previous_response_id) against
// `moeserve serve --scripted-output FILE`, and the raw SSE stream event by event against OpenAI's
// documented sequence.
import assert from 'node:assert/strict';
import { MODEL, startServer, test, run, writeTemp, post, parseNamedSse } from './harness.mjs';

const REASONING = 'Let me add two and two.\n</think>\n\nThe answer is 4.';
const TOOLS_REPLY = 'The user wants weather and time.\n</think>\n\n<minimax:tool_call>\n' +
  '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n' +
  '<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_time">\n' +
  '<parameter name="tz">CET</parameter>\n</invoke>\n</minimax:tool_call>';
const TOOLS = [
  { type: 'function', name: 'get_weather', description: 'Weather forecast',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city'] } },
  { type: 'function', name: 'get_time', description: 'Current time',
    parameters: { type: 'object', properties: { tz: { type: 'string' } } } },
];
const CHAT_TOOLS = TOOLS.map(({ type, ...fn }) => ({ type, function: fn }));
const servers = {};
async function server(name, text) {
  if (!servers[name]) servers[name] = await startServer(['--scripted-output', writeTemp('reply.txt', text)]);
  return servers[name];
}
const QUESTION = 'What is 2 + 2?';

// Event types with runs of the same delta collapsed to "<type>+", item types after added/done.
function shape(events) {
  const out = [];
  for (const { event, data } of events) {
    let name = event;
    if (event.endsWith('.delta')) {
      name += '+';
      if (out.at(-1) === name) continue;
    }
    if (event === 'response.output_item.added' || event === 'response.output_item.done') name += ':' + data.item.type;
    out.push(name);
  }
  return out;
}

async function rawStream(s, body) {
  const r = await post(s.base, '/v1/responses', { ...body, stream: true });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  const events = parseNamedSse(r.text);
  events.forEach((e, i) => assert.equal(e.data.sequence_number, i, 'sequence_number counts from 0'));
  return events;
}

const withoutIds = (items) => items.map(({ id, ...rest }) => rest);

test('responses.create: reasoning and message items, output_text, usage', async () => {
  const s = await server('reasoning', REASONING);
  const r = await s.client().responses.create({ model: 'model', input: QUESTION, instructions: 'Be brief.' });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.model, MODEL);  // the served name (vLLM's default: the --model string)
  assert.equal(r.instructions, 'Be brief.');
  assert.equal(r.error, null);
  assert.equal(r.incomplete_details, null);
  assert.equal(r.output.length, 2);
  const [reasoning, message] = r.output;
  assert.match(reasoning.id, /^rs_/);
  assert.deepEqual(reasoning, { id: reasoning.id, type: 'reasoning', summary: [],
    content: [{ type: 'reasoning_text', text: 'Let me add two and two.' }] });
  assert.match(message.id, /^msg_/);
  assert.deepEqual(message, { id: message.id, type: 'message', status: 'completed', role: 'assistant',
    content: [{ type: 'output_text', text: 'The answer is 4.', annotations: [], logprobs: [] }] });
  assert.equal(r.output_text, 'The answer is 4.');
  const tok = await post(s.base, '/tokenize', { messages: [{ role: 'system', content: 'Be brief.' },
    { role: 'user', content: QUESTION }] });
  assert.equal(r.usage.input_tokens, tok.json.count);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  assert.ok(r.usage.output_tokens > 0);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens < r.usage.output_tokens);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test('stream: the documented event sequence, field by field; the client accumulates the same response', async () => {
  const s = await server('reasoning', REASONING);
  const body = { model: 'model', input: [{ role: 'user', content: QUESTION }] };
  const events = await rawStream(s, body);
  assert.deepEqual(shape(events), ['response.created', 'response.in_progress',
    'response.output_item.added:reasoning', 'response.content_part.added', 'response.reasoning_text.delta+',
    'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done:reasoning',
    'response.output_item.added:message', 'response.content_part.added', 'response.output_text.delta+',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done:message',
    'response.completed']);
  const created = events[0].data.response;
  assert.equal(created.status, 'in_progress');
  assert.deepEqual(created.output, []);
  assert.equal(created.usage, null);
  const itemEvent = (name, type) => events.findIndex((e) => e.event === name && e.data.item.type === type);
  const msgAt = itemEvent('response.output_item.added', 'message');
  const [rsId, msgId] = [events[2].data.item.id, events[msgAt].data.item.id];
  for (const { event, data } of events.slice(2, msgAt)) {
    assert.equal(data.output_index, 0, event);
    if (event !== 'response.output_item.added' && event !== 'response.output_item.done') assert.equal(data.item_id, rsId);
  }
  for (const { event, data } of events.slice(msgAt, -1)) {
    assert.equal(data.output_index, 1, event);
    if (event !== 'response.output_item.added' && event !== 'response.output_item.done') assert.equal(data.item_id, msgId);
  }
  const added = events[msgAt].data;
  assert.deepEqual(added.item, { id: msgId, type: 'message', status: 'in_progress', role: 'assistant', content: [] });
  const part = events[msgAt + 1].data;
  assert.deepEqual(part.part, { type: 'output_text', text: '', annotations: [], logprobs: [] });
  assert.equal(part.content_index, 0);
  const text = events.filter((e) => e.event === 'response.output_text.delta').map((e) => e.data.delta).join('');
  assert.equal(text, 'The answer is 4.');
  assert.equal(events.find((e) => e.event === 'response.output_text.done').data.text, text);
  assert.equal(events.filter((e) => e.event === 'response.reasoning_text.delta').map((e) => e.data.delta).join(''),
    'Let me add two and two.');
  const completed = events.at(-1).data.response;
  assert.equal(completed.status, 'completed');
  assert.equal(completed.id, created.id);
  assert.deepEqual(completed.output, [events[itemEvent('response.output_item.done', 'reasoning')].data.item,
    events[itemEvent('response.output_item.done', 'message')].data.item]);
  const whole = await s.client().responses.create(body);
  assert.deepEqual(withoutIds(completed.output), withoutIds(whole.output));
  assert.equal(completed.usage.output_tokens, whole.usage.output_tokens);

  const client = s.client();
  const final = await client.responses.stream(body).finalResponse();
  assert.equal(final.output_text, 'The answer is 4.');
  const types = [];
  for await (const ev of await client.responses.create({ ...body, stream: true })) types.push(ev.type);
  assert.deepEqual(types, events.map((e) => e.event));
});

test('function tools: function_call items (whole and streamed), then function_call_output round trip', async () => {
  const s = await server('tools', TOOLS_REPLY);
  const client = s.client();
  const input = [{ role: 'user', content: 'Weather and time in Paris?' }];
  const r = await client.responses.create({ model: 'model', input, tools: TOOLS });
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'function_call', 'function_call']);
  const [, a, b] = r.output;
  assert.match(a.id, /^fc_/);
  assert.match(a.call_id, /^call_/);
  assert.deepEqual({ ...a, id: 0, call_id: 0 }, { id: 0, type: 'function_call', status: 'completed', call_id: 0,
    name: 'get_weather', arguments: '{"city": "Paris", "days": 3}' });
  assert.equal(b.name, 'get_time');
  assert.deepEqual(JSON.parse(b.arguments), { tz: 'CET' });

  const events = await rawStream(s, { model: 'model', input, tools: TOOLS });
  assert.deepEqual(shape(events), ['response.created', 'response.in_progress',
    'response.output_item.added:reasoning', 'response.content_part.added', 'response.reasoning_text.delta+',
    'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done:reasoning',
    'response.output_item.added:function_call', 'response.function_call_arguments.delta+',
    'response.function_call_arguments.done', 'response.output_item.done:function_call',
    'response.output_item.added:function_call', 'response.function_call_arguments.delta+',
    'response.function_call_arguments.done', 'response.output_item.done:function_call', 'response.completed']);
  const callAdded = events.find((e) => e.event === 'response.output_item.added' && e.data.item.type === 'function_call').data.item;
  assert.deepEqual({ ...callAdded, id: 0, call_id: 0 }, { id: 0, type: 'function_call', status: 'in_progress',
    call_id: 0, name: 'get_weather', arguments: '' });
  const done = events.find((e) => e.event === 'response.function_call_arguments.done').data;
  assert.equal(done.arguments, '{"city": "Paris", "days": 3}');
  assert.equal(done.name, 'get_weather');
  const final = await client.responses.stream({ model: 'model', input, tools: TOOLS }).finalResponse();
  assert.deepEqual(final.output.filter((o) => o.type === 'function_call').map((o) => [o.name, JSON.parse(o.arguments)]),
    [['get_weather', { city: 'Paris', days: 3 }], ['get_time', { tz: 'CET' }]]);

  // Round trip: the output items go back as input with their outputs.
  const next = [...input, ...r.output,
    { type: 'function_call_output', call_id: a.call_id, output: 'sunny' },
    { type: 'function_call_output', call_id: b.call_id, output: '14:00' }];
  const r2 = await client.responses.create({ model: 'model', input: next, tools: TOOLS });
  assert.equal(r2.status, 'completed');
  const chat = [...input, { role: 'assistant', content: '', reasoning_content: r.output[0].content[0].text,
    tool_calls: [a, b].map((c) => ({ id: c.call_id, type: 'function', function: { name: c.name, arguments: c.arguments } })) },
  { role: 'tool', tool_call_id: a.call_id, content: 'sunny' }, { role: 'tool', tool_call_id: b.call_id, content: '14:00' }];
  const tok = await post(s.base, '/tokenize', { messages: chat, tools: CHAT_TOOLS });
  assert.equal(r2.usage.input_tokens, tok.json.count, 'reasoning and calls reach the template');
  const named = await client.responses.create({ model: 'model', input, tools: TOOLS,
    tool_choice: { type: 'function', name: 'get_time' } });
  assert.deepEqual(named.output.filter((o) => o.type === 'function_call').map((o) => o.name), ['get_time']);
});

test('store, previous_response_id and responses.retrieve', async () => {
  const s = await server('reasoning', REASONING);
  const client = s.client();
  const first = await client.responses.create({ model: 'model', input: QUESTION, instructions: 'Be brief.' });
  const got = await client.responses.retrieve(first.id);
  assert.deepEqual(JSON.parse(JSON.stringify(got)), JSON.parse(JSON.stringify(first)));
  const second = await client.responses.create({ model: 'model', input: 'And 3 + 3?', previous_response_id: first.id });
  assert.equal(second.previous_response_id, first.id);
  // The follow-up renders the first turn (without its instructions) and its answer.
  const chat = [{ role: 'user', content: QUESTION },
    { role: 'assistant', content: 'The answer is 4.', reasoning_content: 'Let me add two and two.' },
    { role: 'user', content: 'And 3 + 3?' }];
  assert.equal(second.usage.input_tokens, (await post(s.base, '/tokenize', { messages: chat })).json.count);
  const unstored = await client.responses.create({ model: 'model', input: QUESTION, store: false });
  assert.equal(unstored.store, false);
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
  const r = await post(s.base, '/v1/responses', { input: 'x', previous_response_id: 'resp_nope' });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'previous_response_id');
  // A streamed response is stored too.
  const events = await rawStream(s, { model: 'model', input: QUESTION });
  const streamedId = events[0].data.response.id;
  assert.equal((await client.responses.retrieve(streamedId)).status, 'completed');
});

test('max_output_tokens -> incomplete (whole and streamed); errors', async () => {
  const s = await server('reasoning', REASONING);
  const r = await s.client().responses.create({ model: 'model', input: QUESTION, max_output_tokens: 3 });
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.usage.output_tokens, 3);
  const events = await rawStream(s, { model: 'model', input: QUESTION, max_output_tokens: 3 });
  assert.equal(events.at(-1).event, 'response.incomplete');
  assert.equal(events.at(-1).data.response.status, 'incomplete');
  let e = await post(s.base, '/v1/responses', { input: QUESTION, tools: [{ type: 'web_search' }] });
  assert.equal(e.status, 400);
  assert.equal(e.json.error.param, 'tools');
  e = await post(s.base, '/v1/responses', { model: 'model' });
  assert.equal(e.status, 400);
  assert.equal(e.json.error.param, 'input');
  e = await post(s.base, '/v1/responses', { input: [{ type: 'input_image', image_url: 'x' }] });
  assert.equal(e.status, 400);
  e = await post(s.base, '/v1/responses', { input: QUESTION, max_output_tokens: 0 });
  assert.equal(e.status, 400);
  assert.equal(e.json.error.param, 'max_output_tokens');
});

await run(async () => { for (const s of Object.values(servers)) await s.stop(); });
