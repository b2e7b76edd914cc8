#!/usr/bin/python3
"""An exported Hugging Face GPT-2 directory against a PyTorch GPT-2 (tests only).

The model below is written against Hugging Face's GPT2LMHeadModel conventions,
not ours: its state-dict names are HF's (transformer.wte.weight,
transformer.h.N.attn.c_attn.weight, ...), its attention and MLP weights are
Conv1D, stored [in, out] and applied as x @ W + b, and lm_head is tied to
transformer.wte (no tensor of its own). It reads config.json and
model.safetensors from the exported directory, loads the tensors by name
(any missing, unexpected or misshapen tensor fails), and compares its logits
in float64 with the ones our CPU engine computed (export_dump) on the same
prompts: the bound is 1e-4 (max abs).

  hf_gpt2_reference.py DUMP_DIR                 check an existing dump
  hf_gpt2_reference.py --hf HF_DIR --ours FILE   check an export against logits our
      engine wrote for its checkpoint (`loom-trainer logits`; scripts/check-export
      imports this module and calls load() and compare_logits() itself)
  hf_gpt2_reference.py --export-dump BIN        run BIN into a temp dir, check it
  hf_gpt2_reference.py --export-dump BIN --perturb NAME
      negative control: BIN moves one element of exported tensor NAME by 0.05;
      passes only if the logits comparison then fails.

Exit status: 0 pass, 1 a mismatch, 2 an environment or input error (e.g. no
torch: Debian's python3-torch). Runs under Debian's /usr/bin/python3.
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"hf_gpt2_reference.py: {e}: this test needs Debian's python3-torch and "
          f"python3-numpy for {sys.executable} (scripts/setup installs them)", file=sys.stderr)
    sys.exit(2)

TOL = 1e-4  # max abs difference of the logits
DTYPES = {"F32": np.dtype("<f4"), "I32": np.dtype("<i4")}
# What config.json must say for transformers to build this very model.
EXPECTED_CONFIG = {
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
    "n_inner": None, "tie_word_embeddings": True, "layer_norm_epsilon": 1e-5, "torch_dtype": "float32",
    "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
}


def read_safetensors(path):
    """(metadata, {name: numpy array}): 8-byte LE header length, JSON header, raw bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}")
        dt = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=dt, count=(end - begin) // dt.itemsize, offset=8 + n + begin)
        tensors[name] = arr.reshape(info["shape"])
    return meta, tensors


class Conv1D(nn.Module):
    """HF's Conv1D: weight [nx (in), nf (out)], y = x @ W + b."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf, dtype=torch.float64))
        self.bias = nn.Parameter(torch.empty(nf, dtype=torch.float64))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        self.c_attn = Conv1D(3 * self.n_embd, self.n_embd)
        self.c_proj = Conv1D(self.n_embd, self.n_embd)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        inner = c["n_inner"] or 4 * c["n_embd"]
        self.c_fc = Conv1D(inner, c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], inner)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))  # gelu_new


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        eps = c["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=eps, dtype=torch.float64)
        self.attn = Attention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=eps, dtype=torch.float64)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"], dtype=torch.float64)
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"], dtype=torch.float64)
        self.h = nn.ModuleList(Block(c) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"], dtype=torch.float64)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = Transformer(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False, dtype=torch.float64)
        self.lm_head.weight = self.transformer.wte.weight  # tie_word_embeddings

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))


def load(hf_dir, verbose=True):
    """The model from config.json + model.safetensors; raises ValueError on any mismatch."""
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = json.load(f)
    for k, want in EXPECTED_CONFIG.items():
        if c.get(k) != want:
            raise ValueError(f"config.json: {k} is {c.get(k)!r}, expected {want!r}")
    meta, tensors = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    if meta.get("format") != "pt":
        raise ValueError(f"model.safetensors: metadata format is {meta.get('format')!r}, transformers wants 'pt'")
    model = GPT2LMHeadModel(c)
    state = {n: torch.from_numpy(a.astype(np.float64)) for n, a in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)  # raises on a shape mismatch
    if unexpected:
        raise ValueError(f"model.safetensors: tensors GPT-2 does not have: {sorted(unexpected)}")
    if missing != ["lm_head.weight"]:  # tied: HF's files do not hold it
        raise ValueError(f"model.safetensors: missing tensors: {sorted(set(missing) - {'lm_head.weight'})}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        raise ValueError("lm_head is not tied to transformer.wte")
    if verbose:
        print(f"  loaded {len(tensors)} tensors: n_layer {c['n_layer']} n_head {c['n_head']} n_embd {c['n_embd']} "
              f"n_positions {c['n_positions']} vocab_size {c['vocab_size']}")
    return model


def compare_logits(model, ours_path):
    """Per prompt of OURS (tokens (B,T) I32, logits (B,T,V) F32): (max|ref logit|, max abs err,
    token, vocab index) against the model's float64 logits; ValueError on a shape mismatch."""
    _, ours = read_safetensors(ours_path)
    ids = torch.from_numpy(ours["tokens"].astype(np.int64))
    with torch.no_grad():
        ref = model(ids).numpy()
    got = ours["logits"].astype(np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"logits shape {got.shape} != reference {ref.shape}")
    rows = []
    for b in range(got.shape[0]):
        err = np.abs(got[b] - ref[b])
        t, v = np.unravel_index(int(err.argmax()), err.shape)
        rows.append((float(np.abs(ref[b]).max()), float(err.max()), int(t), int(v)))
    return rows


def check(hf_dir, ours_path):
    """0 when every prompt's logits are within TOL, 1 when one is over it (or the export does not load)."""
    try:
        model = load(hf_dir)
        rows = compare_logits(model, ours_path)
    except (ValueError, RuntimeError, KeyError, OSError) as e:
        print(f"hf_gpt2_reference.py: {e}")
        return 1
    for b, (top, e, t, v) in enumerate(rows):
        print(f"  prompt {b}: max|logit| {top:.3f}  max abs err {e:.3e} (token {t}, vocab {v})"
              f"{'' if e <= TOL else f'  FAIL (> {TOL:g})'}")
    return 0 if max(r[1] for r in rows) <= TOL else 1


def check_dir(d):
    return check(os.path.join(d, "hf"), os.path.join(d, "ours.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump_dir", nargs="?")
    ap.add_argument("--export-dump", metavar="BIN")
    ap.add_argument("--perturb", metavar="NAME")
    ap.add_argument("--hf", metavar="HF_DIR")
    ap.add_argument("--ours", metavar="FILE")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.hf or a.ours:
        if not (a.hf and a.ours) or a.dump_dir or a.export_dump or a.perturb:
            ap.error("--hf HF_DIR and --ours FILE go together, alone")
        return check(a.hf, a.ours)
    if a.export_dump is None:
        if a.dump_dir is None or a.perturb:
            ap.error("give DUMP_DIR, or --export-dump BIN [--perturb NAME]")
        return check_dir(a.dump_dir)
    with tempfile.TemporaryDirectory(prefix="loom-export-parity-") as d:
        cmd = [a.export_dump, d] + (["--perturb", a.perturb] if a.perturb else [])
        r = subprocess.run(cmd)
        if r.returncode != 0:
            print(f"hf_gpt2_reference.py: {' '.join(cmd)} exited {r.returncode}", file=sys.stderr)
            return 2
        rc = check_dir(d)
    if a.perturb is None:
        return rc
    if rc == 1:
        print(f"negative control: the perturbed {a.perturb} was reported, as it must be")
        return 0
    print(f"negative control FAILED: {a.perturb} was perturbed by 0.05 and the comparison did not see it")
    return 1


if __name__ == "__main__":
    sys.exit(main())
