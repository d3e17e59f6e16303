// Writes the benchmark inputs as JSON arrays of strings: GSM8K test questions and answers, and
// ~10 MB of deterministic mixed-language text cut into paragraphs.
// Usage: node make_bench_texts.js GSM8K_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const { gsm8k, mixedText } = require('./corpus');

const [gsmDir, outDir] = process.argv.slice(2);
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'gsm8k_test.json'), JSON.stringify(gsm8k(gsmDir, 100000)));
const mixed = mixedText(gsmDir, 10 * 1000 * 1000);
fs.writeFileSync(path.join(outDir, 'mixed_10mb.json'), JSON.stringify(mixed.split(/(?<=\n)/)));
console.log(`bench texts in ${outDir}`);
