// Deterministic test strings for tokenizer exactness tests and the benchmark's mixed-language
// file. No randomness from the environment: a fixed-seed PRNG picks and mixes fragments.
'use strict';
const fs = require('fs');
const path = require('path');

function rng(seed) {
  // xorshift32: small, deterministic, good enough for mixing fragments.
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

const MULTILINGUAL = [
  '你好，世界！今天天气很好。我们去公园散步吧。',
  '机器学习是人工智能的一个分支，它使计算机能够从数据中学习。',
  '東京は日本の首都です。ひらがなとカタカナと漢字を使います。',
  '안녕하세요, 만나서 반갑습니다. 한국어는 한글로 씁니다.',
  'مرحبا بالعالم! كيف حالك اليوم؟ اللغة العربية جميلة.',
  'नमस्ते दुनिया! आप कैसे हैं? हिन्दी देवनागरी लिपि में लिखी जाती है।',
  'Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.',
  'Γειά σου Κόσμε! Η ελληνική γλώσσα έχει μακρά ιστορία.',
  'สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ',
  'שלום עולם! עברית נכתבת מימין לשמאל.',
  'Xin chào thế giới! Tiếng Việt có nhiều dấu thanh.',
  'Ελληνικά ΚΕΦΑΛΑΙΑ και πεζά, ΣΊΣΥΦΟΣ',
  'Ünïcödé çàñ bé trîçký: naïve café résumé Straße ŒUVRE',
  'e\u0301 vs \u00e9, a\u0308 vs \u00e4, n\u0303 vs \u00f1, A\u030a vs \u00c5',
  'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333',
  '👍👍🏻👍🏿 👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🇯🇵🇺🇸 ❤️‍🔥 🧑🏾‍🤝‍🧑🏻',
  'Emoji in text: I love 🍕 and 🍣! 😂😂😂 Party 🎉🎊',
  '①②③ ⅰⅱⅲ ½¾ ²³ ٠١٢٣٤٥ ０１２３ 𝟘𝟙𝟚 ﬁﬂ ＡＢＣ ｶﾀｶﾅ',
  'Mixed: English中文日本語한국어العربيةहिन्दी',
  '\u00a0non-breaking\u00a0spaces\u3000ideographic\u2028line\u2029para\u0085nel\u200bzwsp\ufeffbom',
  'tab\there\u000bvt\u000cff\r\ncrlf\rcr',
  'ℌ𝔢𝔩𝔩𝔬 𝕎𝕠𝕣𝕝𝕕 ™ ℃ ㎏ ㍿ Å K',
];

const CODE = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  '#include <iostream>\nint main() {\n\tstd::cout << "Hello, world!" << std::endl;\n\treturn 0;\n}\n',
  '{"name": "moeserve", "version": "0.1.0", "deps": ["pcre2", "icu"], "ok": true, "n": null}',
  'for (let i = 0; i < arr.length; ++i) { sum += arr[i] ** 2; }  // square sum',
  'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC;',
  '<div class="container"><p>Hello &amp; welcome!</p><br/></div>',
  '    indented\n        more indented\n\t\ttabs\n  \t mixed \t \n',
  'x = [1,2,3]; y = {k: v for k, v in zip("abc", x)}; print(f"{y!r:>10}")',
  'fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0xFF; 32]; Ok(()) }',
  '$ ls -la /usr/local/bin | grep -E "^d" && echo "done" || exit 1',
  'https://example.com/path/to/page?query=1&lang=en#section-2 user@example.org',
  'a=b+c*d/e-f%g^h|i&j~k!l?m:n;o,p.q<r>s', '@@ -1,7 +1,9 @@\n-old line\n+new line\n',
];

const SPACES = [
  ' ', '  ', '   ', '    ', '\t', '\t\t', '\n', '\n\n', '\n\n\n', '\r\n', ' \n', '\n ', ' \t\n ',
  '                ', '\t \t \t', '\n\t\n', '   a   b   ', 'a\n\n\nb', '  leading', 'trailing  ',
  '\u3000\u3000', ' \u00a0 ', '\u2003\u2003x',
];

const NUMBERS = [
  '0', '7', '42', '123', '1234', '12345', '123456789012345', '3.14159', '-273.15', '1,000,000',
  '1e-10', '0x1F', '2024-01-15', '12:30:45', '$1,234.56', '50%', '+44 20 7946 0958', '١٢٣٤',
  '3 + 4 = 7', '10000000000000000000000',
];

const CONTRACTIONS = [
  "I'm", "you're", "he's", "she'd", "we'll", "they've", "it's", "don't", "can't", "won't",
  "I'M", "YOU'RE", "DON'T", "We'Ll", "it’s", "rock 'n' roll", "'tis", "o'clock", "y'all'd've",
  "the dog's bone", "James' book", "''quoted''", "'s'", "'S",
];

const SPECIALS = [
  '<|endoftext|>', '<|endofprompt|>', '<|im_start|>', '<|im_end|>', '<|begin_of_text|>',
  '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|reserved_special_token_5|>',
  '<think>', '</think>', '<tool_call>', ']~!b[', ']~b]', '[e~[', '<minimax:tool_call>',
  '</minimax:tool_call>', '<|endof', 'endoftext|>', '<|im_start', '<<|im_end|>>', '<|fim_prefix|>',
];

function gsm8k(dir, limit) {
  const out = [];
  const file = path.join(dir, 'test.jsonl');
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim());
  for (const line of lines.slice(0, limit)) {
    const r = JSON.parse(line);
    out.push(r.question, r.answer);
  }
  return out;
}

// Random strings over chosen Unicode blocks (no surrogates), for coverage beyond curated text.
function randomUnicode(rand, n) {
  const blocks = [[0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff],
    [0x400, 0x4ff], [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff],
    [0x2000, 0x206f], [0x3000, 0x30ff], [0x4e00, 0x4fff], [0xac00, 0xacff], [0xfe00, 0xfe0f],
    [0xff00, 0xffef], [0x1f300, 0x1f64f], [0x1f3fb, 0x1f3ff], [0x1d400, 0x1d4ff], [0x10000, 0x1007f]];
  let s = '';
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = blocks[Math.floor(rand() * blocks.length)];
    s += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
  }
  return s;
}

// >= `count` strings: curated sets, GSM8K, then seeded mixtures of all fragments.
function testStrings(gsmDir, count) {
  const rand = rng(12345);
  const curated = [...MULTILINGUAL, ...CODE, ...SPACES, ...NUMBERS, ...CONTRACTIONS, ...SPECIALS, ''];
  const out = [...curated, ...gsm8k(gsmDir, 600)];
  const pool = [...curated, ...out.slice(curated.length, curated.length + 200)];
  while (out.length < count) {
    const kind = rand();
    if (kind < 0.15) {
      out.push(randomUnicode(rand, 1 + Math.floor(rand() * 40)));
      continue;
    }
    let s = '';
    const parts = 1 + Math.floor(rand() * 5);
    for (let p = 0; p < parts; ++p) {
      s += pool[Math.floor(rand() * pool.length)];
      if (rand() < 0.5) s += SPACES[Math.floor(rand() * SPACES.length)];
      if (rand() < 0.2) s += SPECIALS[Math.floor(rand() * SPECIALS.length)];
    }
    out.push(s);
  }
  return out;
}

// ~`bytes` of mixed-language text for the benchmark.
function mixedText(gsmDir, bytes) {
  const rand = rng(777);
  const pool = [...MULTILINGUAL, ...CODE, ...NUMBERS, ...CONTRACTIONS, ...gsm8k(gsmDir, 1319)];
  const chunks = [];
  let size = 0;
  while (size < bytes) {
    let s = pool[Math.floor(rand() * pool.length)];
    s += rand() < 0.7 ? ' ' : '\n';
    chunks.push(s);
    size += Buffer.byteLength(s);
  }
  return chunks.join('');
}

module.exports = { rng, testStrings, mixedText, gsm8k, SPECIALS };
