// The tokenizer tests' oracle: tiktoken's own gpt2 encoding (npm tiktoken, the
// WASM build of tiktoken's Rust core), run in a separate process.
//   node oracle.js IN OUT
// IN:  documents, each a little-endian u32 byte length then that many bytes of UTF-8.
// OUT: per document a u32 id count then that many u32 ids (encode_ordinary).
// Needs NODE_PATH to reach the package scripts/install-vocab installs.
'use strict';
const fs = require('fs');
const { get_encoding } = require('tiktoken');

const [inPath, outPath] = process.argv.slice(2);
if (!inPath || !outPath) {
  console.error('usage: node oracle.js IN OUT');
  process.exit(2);
}
const enc = get_encoding('gpt2');
const input = fs.readFileSync(inPath);
// fatal: the corpus must be valid UTF-8; ignoreBOM: keep a leading U+FEFF (part of the text).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const out = fs.openSync(outPath, 'w');
let docs = 0;
for (let pos = 0; pos < input.length; ++docs) {
  const len = input.readUInt32LE(pos);
  const text = utf8.decode(input.subarray(pos + 4, pos + 4 + len));
  pos += 4 + len;
  const ids = enc.encode_ordinary(text);
  const rec = Buffer.alloc(4 + 4 * ids.length);
  rec.writeUInt32LE(ids.length, 0);
  Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength).copy(rec, 4);  // WASM memory is little-endian
  fs.writeSync(out, rec);
}
fs.closeSync(out);
enc.free();
console.log(`oracle: ${docs} documents`);
