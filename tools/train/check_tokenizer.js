#!/usr/bin/env node
// Checks a tokenizer folder against ids that train.py produced: HF `tokenizers` loads
// tokenizer.json, single-text encode() (no special tokens added) gives exactly the saved ids for
// every text, and decode() gives the text back.
// Usage: node check_tokenizer.js TOKENIZER_JSON TEXTS_JSONL IDS_JSONL [LIMIT]
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', '..', 'node_modules', '@anush008/tokenizers'));

async function main() {
  const [tokPath, textsPath, idsPath, limitArg] = process.argv.slice(2);
  const lines = (p) => fs.readFileSync(p, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
  const texts = lines(textsPath);
  const ids = lines(idsPath);
  const limit = Math.min(texts.length, limitArg ? parseInt(limitArg, 10) : texts.length);
  const tok = Tokenizer.fromFile(tokPath);
  let bad = 0;
  for (let i = 0; i < limit; ++i) {
    const got = (await tok.encode(texts[i], null, { addSpecialTokens: false })).getIds();
    const back = await tok.decode(got, false);
    if (JSON.stringify(got) !== JSON.stringify(ids[i]) || back !== texts[i]) {
      if (++bad <= 3) console.error(`mismatch at ${i}: ${JSON.stringify(texts[i]).slice(0, 80)}`);
    }
  }
  console.log(`${limit - bad}/${limit} texts: encode matches the training ids and decode round-trips`);
  process.exit(bad ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
