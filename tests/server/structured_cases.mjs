// The structured-output suites' cases: JSON schemas of real shapes (records, nested objects,
// arrays of objects, enums, refs, recursion, string formats, numeric ranges, and the tool
// schemas agent frameworks send), regexes with a JavaScript equivalent for the full-match check,
// choice lists and GBNF grammars with a checker each, and requests that must be refused.
//
// Free-text strings carry a maxLength and arrays a maxItems: a model sampling at temperature 1
// may otherwise ramble past max_tokens, and a "length" finish is a failure in these suites.

const str = (maxLength = 16, extra = {}) => ({ type: 'string', maxLength, ...extra });
const int = (minimum, maximum) => ({ type: 'integer', minimum, maximum });
const obj = (properties, required = Object.keys(properties), extra = {}) =>
  ({ type: 'object', properties, required, additionalProperties: false, ...extra });
const arr = (items, maxItems = 3, minItems = 0) => ({ type: 'array', items, minItems, maxItems });

// An email bounded by a pattern (short, so the tool schemas below stay cheap); the 'email' format
// itself is bounded too now (a local part of at most 64 bytes) and has its own case.
const email = { type: 'string', pattern: '^[a-z]{1,12}@[a-z]{1,10}\\.(com|org|net)$' };

const address = obj({
  street: str(24), city: str(16), zip: { type: 'string', pattern: '^[0-9]{5}$' },
  country: { type: 'string', enum: ['US', 'FR', 'DE', 'JP'] },
});

export const SCHEMAS = [
  ['person', obj({ name: str(20), age: int(0, 120) })],
  ['address', address],
  ['product', obj({ id: { type: 'string', format: 'uuid' }, name: str(20),
    price: { type: 'number', minimum: 0, maximum: 10000 }, tags: arr(str(8)) })],
  ['order with line items', obj({ id: int(1, 99999),
    items: arr(obj({ sku: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{3}$' }, qty: int(1, 10) }), 3, 1),
    status: { type: 'string', enum: ['pending', 'shipped', 'delivered', 'cancelled'] } })],
  ['event with date-times', obj({ title: str(20), start: { type: 'string', format: 'date-time' },
    end: { type: 'string', format: 'date-time' } })],
  ['date', obj({ day: { type: 'string', format: 'date' } })],
  ['time', obj({ at: { type: 'string', format: 'time' } })],
  ['email contact (bounded pattern)', obj({ name: str(12), email: email })],
  ['email contact (format)', obj({ name: str(12), email: { type: 'string', format: 'email' } })],
  ['ipv4 endpoint', obj({ host: { type: 'string', format: 'ipv4' }, port: int(1, 65535) })],
  ['boolean flags', obj({ enabled: { type: 'boolean' }, verbose: { type: 'boolean' }, dry_run: { type: 'boolean' } })],
  ['nullable via type list', obj({ first: str(10), middle: { type: ['string', 'null'], maxLength: 10 } })],
  ['nullable (OpenAPI)', obj({ nickname: { type: 'string', maxLength: 10, nullable: true }, score: int(0, 10) })],
  ['root enum', { type: 'string', enum: ['red', 'green', 'blue', 'light yellow'] }],
  ['const field', obj({ version: { const: 'v1' }, data: int(0, 100) })],
  ['root array of integers', { type: 'array', items: int(-100, 100), minItems: 1, maxItems: 5 }],
  ['tuple (prefixItems)', { type: 'array', prefixItems: [str(8), int(0, 9), { type: 'boolean' }], items: false, minItems: 3 }],
  ['refs to $defs', { type: 'object', $defs: { address },
    properties: { billing: { $ref: '#/$defs/address' }, shipping: { $ref: '#/$defs/address' } },
    required: ['billing', 'shipping'], additionalProperties: false }],
  ['recursive tree', { $defs: { node: obj({ value: int(0, 9), children: arr({ $ref: '#/$defs/node' }, 2) }, ['value']) },
    $ref: '#/$defs/node' }],
  ['recursive linked list', { $defs: { cell: obj({ value: int(0, 99), next: { anyOf: [{ $ref: '#/$defs/cell' }, { type: 'null' }] } }) },
    $ref: '#/$defs/cell' }],
  ['anyOf of objects (shapes)', { anyOf: [
    obj({ kind: { const: 'circle' }, radius: { type: 'number', minimum: 0, maximum: 100 } }),
    obj({ kind: { const: 'square' }, side: int(1, 100) })] }],
  ['oneOf payment', obj({ amount: int(1, 5000), method: { oneOf: [
    obj({ type: { const: 'card' }, last4: { type: 'string', pattern: '^[0-9]{4}$' } }),
    obj({ type: { const: 'bank' }, iban: { type: 'string', pattern: '^[A-Z]{2}[0-9]{8}$' } })] } })],
  // Open parts: two closed objects with different properties would admit nothing.
  ['allOf merge', { allOf: [{ type: 'object', properties: { id: int(1, 1000) }, required: ['id'] },
    { properties: { name: str(12) }, required: ['name'] }] }],
  ['optional properties', obj({ a: int(0, 9), b: str(8), c: { type: 'boolean' } }, ['a'])],
  ['negative integer range', obj({ celsius: int(-50, 50), delta: int(-5, -1) })],
  ['exclusive bounds', obj({ price: { type: 'number', exclusiveMinimum: 0, maximum: 999 }, pct: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 100 } })],
  ['string lengths', obj({ code: { type: 'string', minLength: 2, maxLength: 5 }, note: str(12) })],
  ['three levels deep', obj({ company: str(12), ceo: obj({ name: str(12),
    contact: obj({ email: email, phone: { type: 'string', pattern: '^\\+[0-9]{6,10}$' } }) }) })],
  ['type union', obj({ id: { type: ['integer', 'string'], maxLength: 8, minimum: 0, maximum: 999 } })],
  ['empty object', { type: 'object', properties: {}, additionalProperties: false }],
  ['matrix', obj({ rows: arr(arr(int(0, 9), 3, 1), 3, 1) })],
  ['web search tool', obj({ query: str(30), num_results: int(1, 10),
    recency: { type: 'string', enum: ['day', 'week', 'month', 'any'] } }, ['query'])],
  ['read file tool', obj({ path: { type: 'string', pattern: '^/[a-z/._-]{1,30}$' },
    encoding: { type: 'string', enum: ['utf-8', 'latin-1'] } }, ['path'])],
  ['shell tool', obj({ command: str(40), timeout_s: int(1, 600), cwd: str(20) }, ['command'])],
  ['calendar event tool', obj({ title: str(20), start: { type: 'string', format: 'date-time' },
    duration_minutes: int(15, 480), attendees: arr(email) }, ['title', 'start'])],
  ['send email tool', obj({ to: arr(email, 2, 1), subject: str(30),
    body: str(60), cc: arr(email, 2) }, ['to', 'subject', 'body'])],
  ['sql tool', obj({ query: str(60), database: { type: 'string', enum: ['prod', 'staging'] }, limit: int(1, 1000) })],
  ['http request tool', obj({ method: { type: 'string', enum: ['GET', 'POST', 'PUT', 'DELETE'] },
    url: { type: 'string', pattern: '^https://[a-z]{1,10}\\.com/[a-z]{0,10}$' },
    headers: arr(obj({ name: str(12), value: str(20) }), 2) }, ['method', 'url'])],
  ['classification', obj({ label: { type: 'string', enum: ['spam', 'ham', 'unsure'] },
    confidence: { type: 'number', minimum: 0, maximum: 1 } })],
  ['sentiment', obj({ sentiment: { type: 'string', enum: ['positive', 'negative', 'neutral'] }, score: int(-5, 5) })],
  ['entity extraction', obj({ entities: arr(obj({ text: str(16),
    type: { type: 'string', enum: ['PERSON', 'ORG', 'PLACE', 'DATE'] }, start: int(0, 1000) })) })],
  ['math answer', obj({ reasoning: str(40), answer: int(-100000, 100000) })],
  ['multiple choice', obj({ answer: { type: 'string', enum: ['A', 'B', 'C', 'D'] } })],
  ['yes/no with reason', obj({ answer: { type: 'boolean' }, explanation: str(30) })],
  ['json patch op', obj({ op: { type: 'string', enum: ['add', 'remove', 'replace'] },
    path: { type: 'string', pattern: '^/[a-z]{1,8}$' }, value: int(0, 100) }, ['op', 'path'])],
  ['geo point', obj({ lat: { type: 'number', minimum: -90, maximum: 90 }, lon: { type: 'number', minimum: -180, maximum: 180 } })],
  ['color', obj({ hex: { type: 'string', pattern: '^#[0-9a-f]{6}$' }, name: { type: 'string', enum: ['red', 'teal', 'navy'] } })],
  ['semver', obj({ version: { type: 'string', pattern: '^[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}$' } })],
  ['user with permissions', obj({ user: str(12), role: { type: 'string', enum: ['admin', 'editor', 'viewer'] },
    permissions: arr({ type: 'string', enum: ['read', 'write', 'delete'] }) })],
  ['invoice', obj({ lines: arr(obj({ desc: str(16), qty: int(1, 99), unit_price_cents: int(0, 100000) }), 3, 1),
    currency: { type: 'string', enum: ['USD', 'EUR'] }, due: { type: 'string', format: 'date' } })],
  ['weather report', obj({ city: str(16), temps: arr({ type: 'number', minimum: -60, maximum: 60 }), unit: { type: 'string', enum: ['C', 'F'] } })],
  ['paginated list', { type: 'object', $defs: { item: obj({ id: int(1, 999), title: str(12) }) },
    properties: { page: int(1, 100), per_page: int(1, 50), items: arr({ $ref: '#/$defs/item' }, 2) },
    required: ['page', 'per_page', 'items'], additionalProperties: false }],
  ['config entries', obj({ entries: arr(obj({ key: { type: 'string', pattern: '^[A-Z_]{1,10}$' },
    value: { type: ['string', 'integer', 'boolean'], maxLength: 10, minimum: 0, maximum: 99 } })) })],
  ['graph', obj({ nodes: arr(obj({ id: int(0, 9) })), edges: arr(obj({ from: int(0, 9), to: int(0, 9) })) })],
  ['chat message', obj({ role: { type: 'string', enum: ['user', 'assistant', 'system'] }, content: str(40), name: str(10) }, ['role', 'content'])],
  ['function call shape', obj({ name: { type: 'string', enum: ['get_weather', 'get_time'] }, arguments: obj({ city: str(16) }) })],
  ['plan steps', obj({ steps: arr(obj({ id: int(1, 9), action: { type: 'string', enum: ['search', 'read', 'write', 'ask'] },
    depends_on: arr(int(1, 9), 2) }), 4, 1) })],
  ['product review', obj({ rating: int(1, 5), title: str(20), pros: arr(str(12), 2), cons: arr(str(12), 2) })],
  ['draft-07 definitions', { definitions: { money: obj({ amount: int(0, 10000), currency: { type: 'string', enum: ['USD', 'JPY'] } }) },
    type: 'object', properties: { price: { $ref: '#/definitions/money' }, tax: { $ref: '#/definitions/money' } },
    required: ['price'], additionalProperties: false }],
  ['recursion through root', { type: 'object', properties: { name: str(10), sub: { $ref: '#' } }, required: ['name'], additionalProperties: false }],
  ['pydantic Optional fields', { title: 'Person', type: 'object', properties: {
    name: { title: 'Name', type: 'string', maxLength: 16 },
    nickname: { title: 'Nickname', anyOf: [{ type: 'string', maxLength: 10 }, { type: 'null' }], default: null },
    age: { title: 'Age', anyOf: [{ type: 'integer', minimum: 0, maximum: 150 }, { type: 'null' }] } },
    required: ['name', 'age'], additionalProperties: false }],
  ['LangChain calculator tool', { title: 'calculator', description: 'Do arithmetic', type: 'object', properties: {
    a: { title: 'A', type: 'integer', minimum: -1000, maximum: 1000 }, b: { title: 'B', type: 'integer', minimum: -1000, maximum: 1000 },
    op: { title: 'Op', enum: ['add', 'sub', 'mul', 'div'], type: 'string' } }, required: ['a', 'b', 'op'], additionalProperties: false }],
  ['OpenAI strict-mode shape', obj({ location: str(20), unit: { type: ['string', 'null'], enum: ['celsius', 'fahrenheit', null] } })],
  ['description-heavy agent schema', obj({
    task: { type: 'string', description: 'What to do next', maxLength: 30 },
    priority: { type: 'integer', description: '1 (low) to 3 (high)', minimum: 1, maximum: 3 },
    done: { type: 'boolean', description: 'Whether the task is finished', default: false } })],
];

// Regexes with the JavaScript pattern that fully matches the same strings (u flag).
export const REGEXES = [
  ['[0-9]{3}-[0-9]{4}'],
  ['[a-z]{2,8}@[a-z]{2,6}\\.(com|org|net)'],
  ['(0?[1-9]|1[0-2]):[0-5][0-9] (AM|PM)'],
  ['\\d{4}-\\d{2}-\\d{2}'],
  ['[A-Z][a-z]{1,10}( [A-Z][a-z]{1,10}){0,2}'],
  ['(yes|no|maybe)'],
  ['-?\\d{1,5}(\\.\\d{1,3})?'],
  ['#[0-9a-fA-F]{6}'],
  ['[A-Z]{2}\\d{2} ?\\d{4}'],
  ['(https?)://[a-z]{3,10}\\.(com|io)(/[a-z0-9]{1,8}){0,3}'],
  ['\\(\\d{3}\\) \\d{3}-\\d{4}'],
  ['[a-z_][a-z0-9_]{0,15}'],
  ['(\\d{1,3}\\.){3}\\d{1,3}'],
  ['\\w{3,8}'],
  ['[^,\\n]{1,10}(,[^,\\n]{1,10}){0,3}'],
  ['(true|false)'],
  ['[ACGT]{5,12}'],
  ['^v\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}$'],
  ['(?:ab|cd){1,5}'],
  ['[\\u4e00-\\u9fff]{1,4}'],
  ['\\s?[a-z]{1,5}\\s?'],
  ['(?<year>19|20)\\d{2}'],
].map(([re]) => [re, new RegExp('^(?:' + re.replace(/^\^/, '').replace(/\$$/, '') + ')$', 'u')]);

export const CHOICES = [
  ['positive', 'negative', 'neutral'],
  ['New York City', 'Los Angeles', 'Chicago', 'San Francisco Bay Area'],
  ['café', 'naïve', '東京'],
  ['A', 'AB', 'ABC'],
];

// GBNF grammars and a checker of their language.
export const GRAMMARS = [
  ['root ::= term (("+" | "-") term){0,3}\nterm ::= [0-9]{1,3}', (s) => /^[0-9]{1,3}([+-][0-9]{1,3}){0,3}$/.test(s)],
  ['root ::= "[" item ("," item){0,3} "]"\nitem ::= "\\"" [a-z]{1,6} "\\""',
    (s) => { const v = JSON.parse(s); return Array.isArray(v) && v.length >= 1 && v.length <= 4 && v.every((x) => /^[a-z]{1,6}$/.test(x)); }],
  ['root ::= ("yes" | "no") ", because " [a-z ]{1,20}', (s) => /^(yes|no), because [a-z ]{1,20}$/.test(s)],
  ['root ::= p\np ::= "(" p{0,2} ")"', (s) => {
    let depth = 0;
    for (const c of s) { depth += c === '(' ? 1 : -1; if (depth < 0) return false; }
    return depth === 0 && /^[()]+$/.test(s);
  }],
  ['# a key=value list\nroot ::= pair (";" pair){0,2}\npair ::= key "=" value\nkey ::= [a-z]{1,5}\nvalue ::= [0-9]{1,4} | "\\"" [A-Za-z ]{0,8} "\\""',
    (s) => /^[a-z]{1,5}=([0-9]{1,4}|"[A-Za-z ]{0,8}")(;[a-z]{1,5}=([0-9]{1,4}|"[A-Za-z ]{0,8}")){0,2}$/.test(s)],
];

// Bodies every constrained route must refuse with a 400; `mention` is a text the message names.
export const REFUSED = [
  ['unknown response_format type', { response_format: { type: 'bogus' } }, 'bogus'],
  ['structural_tag response_format', { response_format: { type: 'structural_tag', structures: [] } }, 'structural_tag'],
  ['json_schema without schema', { response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'schema'],
  ['two constraints', { response_format: { type: 'json_object' }, guided_regex: 'a+' }, 'guided_regex'],
  ['two vLLM constraints', { structured_outputs: { regex: 'a', choice: ['a'] } }, 'choice'],
  ['empty choice', { guided_choice: [] }, 'guided_choice'],
  ['patternProperties', { guided_json: { type: 'object', properties: { x: { type: 'object', patternProperties: { '^a': {} } } } } }, 'patternProperties'],
  ['uniqueItems', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }, 'uniqueItems'],
  ['not', { structured_outputs: { json: { not: { type: 'string' } } } }, "'not'"],
  ['if/then/else', { json_schema: { if: { type: 'string' }, then: { maxLength: 3 } } }, "'if'"],
  ['multipleOf', { guided_json: { type: 'integer', multipleOf: 3 } }, 'multipleOf'],
  ['minProperties', { guided_json: { type: 'object', minProperties: 1 } }, 'minProperties'],
  ['regex lookahead', { guided_regex: '(?=a)abc' }, 'guided_regex'],
  ['regex backreference', { structured_outputs: { regex: '(a)\\1' } }, 'regex'],
  ['regex word boundary', { guided_regex: '\\bword\\b' }, 'guided_regex'],
  ['malformed regex', { guided_regex: '(ab' }, 'guided_regex'],
  ['malformed GBNF', { guided_grammar: 'root ::= ("a"' }, 'guided_grammar'],
  ['GBNF without root', { grammar: 'start ::= "a"' }, 'root'],
  ['GBNF undefined rule', { structured_outputs: { grammar: 'root ::= missing' } }, 'missing'],
  ['malformed schema text', { guided_json: '{"type": ' }, 'guided_json'],
];
