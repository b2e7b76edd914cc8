// The export tests' outside reader of GGUF files: Hugging Face's GGUF parser
// (npm @huggingface/gguf, scripts/install-vocab) reads a file we wrote, and
// this script reports what it found, decoding each tensor's data itself from
// the parser's offsets.
//   node gguf_oracle.js FILE OUT_JSON OUT_BIN
// OUT_JSON: {"tensorDataOffset": "N", "metadata": {key: {"type": T, "subType": S,
//            "value": V}}, "tensorInfos": [{"name", "shape": ["N", ...], "dtype", "offset": "N"}]}
//           (64-bit integers as decimal strings).
// OUT_BIN:  every tensor's values as little-endian float32, in tensorInfos
//           order (f32 as stored, f16 and q8_0 decoded: value = q * d).
// Needs NODE_PATH to reach the package.
'use strict';
const fs = require('fs');
const { gguf } = require('@huggingface/gguf');

const [file, outJson, outBin] = process.argv.slice(2);
if (!file || !outJson || !outBin) {
  console.error('usage: node gguf_oracle.js FILE OUT_JSON OUT_BIN');
  process.exit(2);
}

function half(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

// ggml_type -> [bytes per block, values per block, decode(buf, at, out, k)]
const TYPES = {
  0: [4, 1, (b, at, out, k) => { out[k] = b.readFloatLE(at); }],
  1: [2, 1, (b, at, out, k) => { out[k] = half(b.readUInt16LE(at)); }],
  8: [34, 32, (b, at, out, k) => {
    const d = half(b.readUInt16LE(at));
    for (let i = 0; i < 32; ++i) out[k + i] = b.readInt8(at + 2 + i) * d;
  }],
};

(async () => {
  const r = await gguf(file, { allowLocalFile: true, typedMetadata: true });
  const big = (_, v) => (typeof v === 'bigint' ? v.toString() : v);
  const metadata = {};
  for (const [k, e] of Object.entries(r.typedMetadata)) metadata[k] = e;
  fs.writeFileSync(outJson, JSON.stringify({
    tensorDataOffset: r.tensorDataOffset, metadata, tensorInfos: r.tensorInfos,
  }, big));

  const bytes = fs.readFileSync(file);
  const parts = [];
  for (const t of r.tensorInfos) {
    const spec = TYPES[t.dtype];
    if (!spec) throw new Error(`tensor ${t.name}: ggml type ${t.dtype} not decoded here`);
    const [blockBytes, perBlock, decode] = spec;
    const n = t.shape.reduce((a, d) => a * Number(d), 1);
    const out = new Float32Array(n);
    const start = Number(r.tensorDataOffset + t.offset);
    if (start + (n / perBlock) * blockBytes > bytes.length) throw new Error(`tensor ${t.name} runs past the end of ${file}`);
    for (let blk = 0; blk < n / perBlock; ++blk) decode(bytes, start + blk * blockBytes, out, blk * perBlock);
    parts.push(Buffer.from(out.buffer));
  }
  fs.writeFileSync(outBin, Buffer.concat(parts));
  console.log(`gguf_oracle: ${r.tensorInfos.length} tensors, ${Object.keys(metadata).length} metadata entries`);
})().catch((e) => {
  console.error(`gguf_oracle: ${e.stack || e}`);
  process.exit(1);
});
