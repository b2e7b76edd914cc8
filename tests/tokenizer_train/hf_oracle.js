// The training tests' oracle: Hugging Face's tokenizers.js (npm
// @huggingface/tokenizers, a pure-JS implementation of tokenizer.json) encoding
// documents with a tokenizer.json, in a separate process.
//   node hf_oracle.js TOKENIZER_JSON IN OUT
// IN:  documents, each a little-endian u32 byte length then that many bytes of UTF-8.
// OUT: per document a u32 id count then that many u32 ids.
// Needs NODE_PATH to reach the package scripts/install-vocab installs.
'use strict';
const fs = require('fs');
const { Tokenizer } = require('@huggingface/tokenizers');

const [tokPath, inPath, outPath] = process.argv.slice(2);
if (!tokPath || !inPath || !outPath) {
  console.error('usage: node hf_oracle.js TOKENIZER_JSON IN OUT');
  process.exit(2);
}
const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokPath, 'utf8')), {});
const input = fs.readFileSync(inPath);
// fatal: the documents must be valid UTF-8; ignoreBOM: keep a leading U+FEFF.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const out = fs.openSync(outPath, 'w');
let docs = 0;
for (let pos = 0; pos < input.length; ++docs) {
  const len = input.readUInt32LE(pos);
  const text = utf8.decode(input.subarray(pos + 4, pos + 4 + len));
  pos += 4 + len;
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  const rec = Buffer.alloc(4 + 4 * ids.length);
  rec.writeUInt32LE(ids.length, 0);
  ids.forEach((id, i) => rec.writeUInt32LE(id, 4 + 4 * i));
  fs.writeSync(out, rec);
}
fs.closeSync(out);
console.log(`hf_oracle: ${docs} documents`);
