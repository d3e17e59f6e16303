// Writes the reference (Hugging Face `tokenizers`, via @anush008/tokenizers) ids and decodes for
// the test strings of tools/tokenizer/corpus.js, one JSON file per tokenizer.json.
// Usage: node make_expectations.js [--count N] OUT_DIR GSM8K_DIR NAME=PATH/tokenizer.json|@DIR ...
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');
const { rng, testStrings } = require('./corpus');

async function main() {
  let argv = process.argv.slice(2);
  let count = 2200;
  if (argv[0] === '--count') {
    count = parseInt(argv[1], 10);
    argv = argv.slice(2);
  }
  const [outDir, gsmDir, ...rest] = argv;
  let specs = rest;
  if (!outDir || !gsmDir || specs.length === 0) {
    console.error('usage: node make_expectations.js OUT_DIR GSM8K_DIR NAME=tokenizer.json ...');
    process.exit(2);
  }
  // "@DIR" stands for NAME=DIR/NAME.json for every .json file in DIR.
  specs = specs.flatMap((spec) => !spec.startsWith('@') ? [spec] :
    fs.readdirSync(spec.slice(1)).filter((f) => f.endsWith('.json')).sort()
      .map((f) => `${f.slice(0, -5)}=${path.join(spec.slice(1), f)}`));
  fs.mkdirSync(outDir, { recursive: true });
  const strings = testStrings(gsmDir, count);
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    const name = spec.slice(0, eq);
    const file = spec.slice(eq + 1);
    const tok = Tokenizer.fromFile(file);
    const cases = [];
    for (const text of strings) {
      const withSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      cases.push({
        text,
        ids: withSpecial,
        ids_plain: plain,
        decoded: await tok.decode(withSpecial, false),
        decoded_skip: await tok.decode(withSpecial, true),
      });
    }
    // Arbitrary id sequences: partial UTF-8, special and unknown ids exercise the decoder.
    const rand = rng(4242);
    const vocab = tok.getVocabSize(true);
    const specials = Object.values(tok.getVocab(true)).filter((id) => id >= vocab - 300);
    const decodes = [];
    for (let i = 0; i < 300; ++i) {
      const ids = [];
      const n = 1 + Math.floor(rand() * 12);
      for (let k = 0; k < n; ++k) {
        const r = rand();
        if (r < 0.1 && specials.length) ids.push(specials[Math.floor(rand() * specials.length)]);
        else if (r < 0.15) ids.push(vocab + 100000 + Math.floor(rand() * 10));
        else if (r < 0.5) ids.push(Math.floor(rand() * 256));
        else ids.push(Math.floor(rand() * vocab));
      }
      decodes.push({ ids, text: await tok.decode(ids, false), text_skip: await tok.decode(ids, true) });
    }
    const out = path.join(outDir, `${name}.json`);
    fs.writeFileSync(out, JSON.stringify({ tokenizer: path.resolve(file), cases, decodes }));
    console.log(`${name}: ${cases.length} strings, ${decodes.length} id sequences -> ${out}`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
