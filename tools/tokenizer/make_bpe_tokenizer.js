#!/usr/bin/env node
// Trains a small byte-level BPE tokenizer.json (Hugging Face `tokenizers` format) with the GPT-4o
// (o200k) pre-tokenizer and the MiniMax-M2 special tokens appended as added tokens, plus a
// tokenizer_config.json with bos/eos and the chat template. Deterministic: the same inputs give
// the same files (ties between equally frequent pairs go to the smaller id pair).
//
// Usage: node make_bpe_tokenizer.js --out DIR [--vocab 3000] [--template minimax-m2.jinja]
//          FILE...   (FILE: .jsonl, every string field is used as text; anything else: plain text)
'use strict';
const fs = require('fs');
const path = require('path');

// The o200k pattern exactly as tokenizer.json stores it (HF runs it with Oniguruma, moeserve with
// PCRE2). JavaScript lacks (?i:...), so training uses an equivalent spelled-out alternation.
const O200K_PATTERN =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
  "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const JS_PATTERN = new RegExp(
  O200K_PATTERN.replaceAll("(?i:'s|'t|'re|'ve|'m|'ll|'d)",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"), 'gu');

// MiniMax-M2 special tokens (see MINIMAX-M2.md): role start, end of turn, begin of text, thinking
// and tool-call delimiters. The real vocab has 54 specials at 200000..200053; these are the ones
// the chat template and the engine use.
const SPECIAL_TOKENS = [']~!b[', ']~b]', '[e~[', '<think>', '</think>', '<minimax:tool_call>',
  '</minimax:tool_call>'];
const BOS = ']~!b[';
const EOS = '[e~[';

function byteLevelAlphabet() {
  const chars = [];
  let next = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

function parseArgs(argv) {
  const args = { out: null, vocab: 3000, template: null, files: [] };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--out') args.out = argv[++i];
    else if (argv[i] === '--vocab') args.vocab = parseInt(argv[++i], 10);
    else if (argv[i] === '--template') args.template = argv[++i];
    else args.files.push(argv[i]);
  }
  if (!args.out || args.files.length === 0 || !(args.vocab >= 256)) {
    console.error('usage: make_bpe_tokenizer.js --out DIR [--vocab N>=256] [--template F] FILE...');
    process.exit(2);
  }
  return args;
}

function* texts(file) {
  const data = fs.readFileSync(file, 'utf8');
  if (!file.endsWith('.jsonl')) {
    yield data;
    return;
  }
  for (const line of data.split('\n')) {
    if (!line.trim()) continue;
    const rec = JSON.parse(line);
    for (const key of Object.keys(rec).sort()) if (typeof rec[key] === 'string') yield rec[key];
  }
}

// Binary max-heap of [count, key] with lazy deletion (entries are checked against live counts).
class Heap {
  constructor() { this.a = []; }
  better(x, y) { return x[0] > y[0] || (x[0] === y[0] && x[1] < y[1]); }
  push(e) {
    const a = this.a; a.push(e);
    for (let i = a.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (!this.better(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]]; i = p;
    }
  }
  pop() {
    const a = this.a; const top = a[0]; const last = a.pop();
    if (a.length) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1, r = l + 1; let m = i;
        if (l < a.length && this.better(a[l], a[m])) m = l;
        if (r < a.length && this.better(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]]; i = m;
      }
    }
    return top;
  }
  get size() { return this.a.length; }
}

function train(allTexts, vocabSize) {
  const alphabet = byteLevelAlphabet();
  const counts = new Map();
  for (const text of allTexts) {
    for (const m of text.matchAll(JS_PATTERN)) counts.set(m[0], (counts.get(m[0]) || 0) + 1);
  }
  const wordList = [...counts.keys()].sort();
  const words = wordList.map((w) => ({ syms: [...Buffer.from(w, 'utf8')], n: counts.get(w) }));
  const tokens = alphabet.slice();  // id -> string
  const ids = new Map(tokens.map((t, i) => [t, i]));
  const merges = [];
  const K = 1 << 20;  // pair key = left * K + right (ids stay far below 2^20)
  const pairCount = new Map();
  const where = new Map();
  const heap = new Heap();
  const add = (w, sign) => {
    const s = words[w].syms;
    for (let i = 0; i + 1 < s.length; ++i) {
      const key = s[i] * K + s[i + 1];
      pairCount.set(key, (pairCount.get(key) || 0) + sign * words[w].n);
      if (sign > 0) {
        if (!where.has(key)) where.set(key, new Set());
        where.get(key).add(w);
      }
    }
  };
  for (let w = 0; w < words.length; ++w) add(w, 1);
  for (const [key, c] of pairCount) heap.push([c, key]);

  while (tokens.length < vocabSize && heap.size) {
    const [c, key] = heap.pop();
    if (pairCount.get(key) !== c) continue;  // stale entry
    if (c < 2) break;
    const left = Math.floor(key / K), right = key % K;
    const merged = tokens[left] + tokens[right];
    let id = ids.get(merged);
    if (id === undefined) {
      id = tokens.length;
      tokens.push(merged);
      ids.set(merged, id);
    }
    merges.push([tokens[left], tokens[right]]);
    const touched = new Set();
    for (const w of [...where.get(key)].sort((x, y) => x - y)) {
      const s = words[w].syms;
      let has = false;
      for (let i = 0; i + 1 < s.length; ++i) if (s[i] === left && s[i + 1] === right) has = true;
      if (!has) continue;
      for (let i = 0; i + 1 < s.length; ++i) touched.add(s[i] * K + s[i + 1]);
      add(w, -1);
      const out = [];
      for (let i = 0; i < s.length; ++i) {
        if (i + 1 < s.length && s[i] === left && s[i + 1] === right) { out.push(id); ++i; } else out.push(s[i]);
      }
      words[w].syms = out;
      add(w, 1);
      for (let i = 0; i + 1 < out.length; ++i) touched.add(out[i] * K + out[i + 1]);
    }
    pairCount.delete(key);
    for (const k of [...touched].sort((x, y) => x - y)) {
      const n = pairCount.get(k);
      if (n > 0) heap.push([n, k]);
    }
  }
  return { tokens, merges };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const allTexts = [];
  for (const f of args.files) for (const t of texts(f)) allTexts.push(t);
  const { tokens, merges } = train(allTexts, args.vocab);
  const vocab = {};
  tokens.forEach((t, i) => { vocab[t] = i; });
  const added = SPECIAL_TOKENS.map((content, i) => ({
    id: tokens.length + i, content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: true,
  }));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: O200K_PATTERN }, behavior: 'Removed', invert: true },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab, merges,
    },
  };
  const addedDecoder = {};
  for (const a of added) {
    addedDecoder[String(a.id)] = { content: a.content, lstrip: false, normalized: false,
      rstrip: false, single_word: false, special: true };
  }
  const config = {
    added_tokens_decoder: addedDecoder,
    bos_token: BOS,
    eos_token: EOS,
    unk_token: null,
    clean_up_tokenization_spaces: false,
    model_max_length: 196608,
    tokenizer_class: 'GPT2Tokenizer',
  };
  if (args.template) config.chat_template = fs.readFileSync(args.template, 'utf8');
  fs.mkdirSync(args.out, { recursive: true });
  fs.writeFileSync(path.join(args.out, 'tokenizer.json'), JSON.stringify(tokenizer, null, 1) + '\n');
  fs.writeFileSync(path.join(args.out, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
  console.log(`wrote ${args.out}: ${tokens.length} tokens, ${merges.length} merges, ` +
    `${added.length} special tokens (ids ${tokens.length}..${tokens.length + added.length - 1})`);
}

main();
