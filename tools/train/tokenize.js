#!/usr/bin/env node
// Tokenizes texts with Hugging Face `tokenizers` (the @anush008/tokenizers binding), so training
// and evaluation use exactly HF's ids (added special tokens such as ]~b] are matched in the text;
// nothing is prepended or appended).
// Usage: node tokenize.js TOKENIZER_JSON IN_JSONL OUT_JSONL
//   IN_JSONL: one JSON string per line; OUT_JSONL: one JSON array of ids per line, same order.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', '..', 'node_modules', '@anush008/tokenizers'));

async function main() {
  const [tokPath, inPath, outPath] = process.argv.slice(2);
  if (!outPath) {
    console.error('usage: tokenize.js TOKENIZER_JSON IN_JSONL OUT_JSONL');
    process.exit(2);
  }
  const tok = Tokenizer.fromFile(tokPath);
  const texts = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
  const out = [];
  const BATCH = 512;
  for (let i = 0; i < texts.length; i += BATCH) {
    const encs = await tok.encodeBatch(texts.slice(i, i + BATCH), { addSpecialTokens: false });
    for (const e of encs) out.push(JSON.stringify(e.getIds()));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
