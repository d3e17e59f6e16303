// Single-thread encode throughput of Hugging Face tokenizers (@anush008/tokenizers), same
// inputs and passes as bench/tokenizer/bench_tokenizer.cc. Run with RAYON_NUM_THREADS=1 and
// TOKENIZERS_PARALLELISM=false so that encodeBatch stays on one thread; the batch call avoids
// paying the node <-> Rust hop per string.
// Usage: node bench_hf.js TOKENIZER_JSON TEXTS_JSON...
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const [tokPath, ...files] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  for (const f of files) {
    const texts = JSON.parse(fs.readFileSync(f, 'utf8'));
    const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
    let best = Infinity, cold = 0, tokens = 0;
    for (let pass = 0; pass < 4; ++pass) {
      const start = process.hrtime.bigint();
      const encs = await tok.encodeBatch(texts, { addSpecialTokens: false });
      const s = Number(process.hrtime.bigint() - start) / 1e9;
      tokens = encs.reduce((n, e) => n + e.getLength(), 0);
      if (pass === 0) cold = s; else best = Math.min(best, s);
    }
    console.log(`hf-rust   ${path.basename(f).padEnd(28)} ${(bytes / 1e6).toFixed(2).padStart(8)} MB  ` +
      `${String(tokens).padStart(9)} tokens  cold ${(bytes / 1e6 / cold).toFixed(2).padStart(7)} MB/s  ` +
      `warm ${(bytes / 1e6 / best).toFixed(2).padStart(7)} MB/s`);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
