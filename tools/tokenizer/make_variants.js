// Writes tokenizer.json variants that exercise components the public files do not use (split
// behaviours, Digits, normalizers, added-token options, TemplateProcessing, byte fallback, unk,
// Metaspace), so that the exactness test checks them against Hugging Face `tokenizers` too.
// Usage: node make_variants.js BASE_TOKENIZER_JSON OUT_DIR   (BASE: a byte-level BPE file)
'use strict';
const fs = require('fs');
const path = require('path');

const [basePath, outDir] = process.argv.slice(2);
if (!basePath || !outDir) {
  console.error('usage: node make_variants.js BASE_TOKENIZER_JSON OUT_DIR');
  process.exit(2);
}
const base = JSON.parse(fs.readFileSync(basePath, 'utf8'));
const clone = (x) => JSON.parse(JSON.stringify(x));
const split = (pattern, behavior, invert = false) => ({ type: 'Split', pattern, behavior, invert });
const byteLevel = (add_prefix_space, use_regex) =>
  ({ type: 'ByteLevel', add_prefix_space, trim_offsets: true, use_regex });
const variants = {};
const nextId = Object.keys(base.model.vocab).length + base.added_tokens.length;

let v = clone(base);
v.pre_tokenizer = { type: 'Sequence', pretokenizers: [
  split({ String: ' ' }, 'MergedWithPrevious'), split({ Regex: '[0-9]+' }, 'MergedWithNext'),
  byteLevel(true, true)] };
variants.var_split_merged = v;

v = clone(base);
v.pre_tokenizer = { type: 'Sequence', pretokenizers: [
  split({ Regex: '[,.!?]' }, 'Contiguous'), split({ String: 'e' }, 'Isolated', true),
  { type: 'Digits', individual_digits: true }, byteLevel(false, false)] };
variants.var_split_contiguous = v;

v = clone(base);
v.pre_tokenizer = { type: 'Sequence', pretokenizers: [
  split({ Regex: '\\s+' }, 'Removed'), { type: 'Digits', individual_digits: false },
  split({ Regex: '\\p{Lu}' }, 'MergedWithNext', true), byteLevel(true, false)] };
v.post_processor = { type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: ']~!b[', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: '[e~[', type_id: 0 } }],
  pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: {
    ']~!b[': { id: ']~!b[', ids: [base.added_tokens[0].id], tokens: [']~!b['] },
    '[e~[': { id: '[e~[', ids: [base.added_tokens[2].id], tokens: ['[e~['] } } };
variants.var_removed_template = v;

v = clone(base);
v.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' },
  { type: 'Replace', pattern: { String: '  ' }, content: ' ' },
  { type: 'Replace', pattern: { Regex: '[0-9]' }, content: '#' }, { type: 'Prepend', prepend: '_' }] };
v.added_tokens = v.added_tokens.concat([
  { id: nextId, content: 'hello', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: nextId + 1, content: '<mask>', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
  { id: nextId + 2, content: 'World', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
  { id: nextId + 3, content: 'the', single_word: true, lstrip: true, rstrip: false, normalized: false, special: false },
  { id: nextId + 4, content: '<think>x', single_word: false, lstrip: false, rstrip: true, normalized: false, special: true }]);
variants.var_normalized_added = v;

// A SentencePiece-style (Llama 2) model: '▁' for spaces, <0xNN> byte fallback, <unk>.
function spVocab() {
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  let id = 259;
  const add = (t) => { if (!(t in vocab)) vocab[t] = id++; };
  add('▁');
  for (let c = 0x21; c < 0x7f; ++c) add(String.fromCharCode(c));
  for (const c of 'éüß中文') add(c);
  const merges = [];
  const merge = (a, b) => { add(a + b); merges.push(`${a} ${b}`); };
  for (const [a, b] of [['▁', 't'], ['h', 'e'], ['▁t', 'he'], ['i', 'n'], ['▁', 'a'], ['e', 'r'],
    ['▁', 's'], ['o', 'n'], ['a', 'n'], ['r', 'e'], ['▁', 'w'], ['in', 'g'], ['e', 's'], ['▁', 'c'],
    ['▁', 'o'], ['o', 'r'], ['e', 'n'], ['▁a', 'n'], ['▁an', 'd'], ['1', '2'], ['12', '3'],
    ['▁', '▁'], ['▁▁', '▁▁'], ['中', '文']]) merge(a, b);
  return { vocab, merges };
}
const sp = spVocab();
const spModel = (extra) => Object.assign({ type: 'BPE', dropout: null, unk_token: '<unk>',
  continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true,
  vocab: sp.vocab, merges: sp.merges }, extra);
const spAdded = [
  { id: 0, content: '<unk>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  { id: 1, content: '<s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  { id: 2, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }];
const spTemplate = { type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } };
variants.var_llama2_bytefallback = {
  version: '1.0', truncation: null, padding: null, added_tokens: spAdded,
  normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
    { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
  pre_tokenizer: null, post_processor: spTemplate,
  decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' },
    { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
  model: spModel({}),
};
v = clone(variants.var_llama2_bytefallback);
v.model = spModel({ byte_fallback: false, fuse_unk: false });
variants.var_unk_not_fused = v;
v = clone(variants.var_llama2_bytefallback);
v.model = spModel({ byte_fallback: false, fuse_unk: true, unk_token: null });
variants.var_no_unk = v;
v = clone(variants.var_llama2_bytefallback);
v.normalizer = null;
v.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true };
v.decoder = { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }] };
variants.var_metaspace = v;
v = clone(variants.var_metaspace);
v.pre_tokenizer.prepend_scheme = 'first';
v.pre_tokenizer.split = false;
v.decoder.decoders[1].prepend_scheme = 'first';
variants.var_metaspace_first = v;

fs.mkdirSync(outDir, { recursive: true });
for (const [name, tok] of Object.entries(variants)) {
  fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(tok));
}
console.log(`wrote ${Object.keys(variants).length} variants to ${outDir}`);
