#!/usr/bin/python3
"""The GPT-2 engine against a float64 PyTorch reference (tests only).

Reads the safetensors files that engine_dump writes (one per case), rebuilds
the same GPT-2 in PyTorch from the dumped weights, and checks that the
engine's logits, loss and every gradient are within 1e-4 (max abs) of
autograd's; for the cases that train, also each train_step's gradients, loss,
grad norm and learning rate, and the parameters after torch.optim.AdamW is fed
the engine's gradients (bound 1e-6, see OPT_TOL).

  torch_reference.py DUMP_DIR                   check an existing dump
  torch_reference.py --engine-dump BIN          run BIN into a temp dir, check it
  torch_reference.py --engine-dump BIN --perturb NAME
      negative control: BIN moves tensor NAME by 2e-4; passes only if NAME is
      reported, and nothing else, in every case that holds it.

Exit status: 0 pass, 1 a mismatch (the first tensor over the bound is named),
2 an environment or input error (e.g. no torch: Debian's python3-torch).
Runs under Debian's /usr/bin/python3; needs no package beyond torch and numpy.
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
    import torch.nn.functional as F
except ImportError as e:
    print(f"torch_reference.py: {e}: this test needs Debian's python3-torch and "
          f"python3-numpy for {sys.executable} (scripts/setup installs them)", file=sys.stderr)
    sys.exit(2)

TOL = 1e-4  # the parity bound on logits, loss and gradients (max abs)
# AdamW's parameters: an elementwise fp32 update from the same gradients, so
# only rounding separates them (~1e-7 measured); the tighter bound still sees
# a wrongly decayed bias (lr·wd·|b| ~ 1e-4 here), which 1e-4 could miss.
OPT_TOL = 1e-6
LR_RTOL = 1e-6  # the schedule's lr: fp32 against float64, relative
TENSORS = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
           "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}  # AdamW decays 2-D matrices only
DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I32": np.dtype("<i4"),
          "I64": np.dtype("<i8")}


def read_safetensors(path):
    """(metadata, {name: numpy array}): 8-byte LE header length, JSON header, raw bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        dt = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=dt, count=(end - begin) // dt.itemsize, offset=8 + n + begin)
        tensors[name] = arr.reshape(info["shape"])
    return meta, tensors


def gpt2_loss(p, cfg, inputs, targets, weights):
    """Logits (B,T,Vp) and the weighted mean loss Σ w·loss / Σ w, straight from the GPT-2 formulas."""
    B, T = inputs.shape
    L, NH, C, V = cfg["layers"], cfg["heads"], cfg["channels"], cfg["vocab"]
    hs = C // NH
    x = p["wte"][inputs] + p["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        q, k, v = (h @ p["qkvw"][l].T + p["qkvb"][l]).split(C, dim=-1)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))  # (B,NH,T,hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = x @ p["wte"].T  # tied head over all Vp rows; padding rows are zero
    # The softmax covers the V real tokens only: padding columns take no probability.
    losses = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    return logits, (losses * w).sum() / w.sum()


def grad_of(p):
    """autograd's gradient; a tensor the loss never used has none, i.e. zero."""
    return p.grad if p.grad is not None else torch.zeros_like(p)


def leaf_params(arrays, prefix=""):
    return {n: torch.tensor(arrays[prefix + n], dtype=torch.float64, requires_grad=True)
            for n in TENSORS}


def batch(t, j):
    return (torch.tensor(t[f"mb{j}.inputs"], dtype=torch.long),
            torch.tensor(t[f"mb{j}.targets"], dtype=torch.long),
            torch.tensor(t[f"mb{j}.weights"], dtype=torch.float64))


def lr_at(meta, step):
    """lr_schedule::at, in float64."""
    max_lr, min_lr = float(meta["max_lr"]), float(meta["min_lr"])
    warmup, total = int(meta["warmup_steps"]), int(meta["total_steps"])
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    ratio = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


class checker:
    """Collects max abs errors; prints one line per comparison."""

    def __init__(self):
        self.failures = []  # (case, name, err, bound)

    def compare(self, case, name, engine, ref, bound=TOL, label=None):
        e = np.asarray(engine, dtype=np.float64)
        r = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref, np.float64)
        if e.shape != r.shape:
            self.failures.append((case, name, math.inf, bound))
            print(f"  {label or name:<22} shape {e.shape} != reference {r.shape}  FAIL")
            return
        err = float(np.max(np.abs(e - r))) if e.size else 0.0
        ok = err <= bound
        if not ok:
            self.failures.append((case, name, err, bound))
        print(f"  {label or name:<22} {str(tuple(e.shape)):<16} max|ref| {np.max(np.abs(r)):.3e}"
              f"  max abs err {err:.3e}{'' if ok else f'  FAIL (> {bound:g})'}")


def check_forward_backward(case, t, cfg, chk):
    """Micro-batch 0 at the initial weights: logits, loss, every gradient."""
    p = leaf_params(t)
    logits, loss = gpt2_loss(p, cfg, *batch(t, 0))
    loss.backward()
    chk.compare(case, "logits", t["logits"], logits)
    chk.compare(case, "loss", t["loss"], loss)
    for n in TENSORS:
        chk.compare(case, "grad." + n, t["grad." + n], grad_of(p[n]))


def check_steps(case, meta, t, cfg, chk):
    """Each train_step: gradients (mean over micro-batches, autograd at the engine's
    parameters of that step), loss, grad norm, lr, and the parameters after
    torch.optim.AdamW steps on the engine's gradients with the same clipping."""
    k = int(meta["micro_batches"])
    opt_p = {n: torch.tensor(t[n], dtype=torch.float64) for n in TENSORS}
    wd = float(meta["weight_decay"])
    opt = torch.optim.AdamW(
        [{"params": [opt_p[n] for n in TENSORS if n in DECAYED], "weight_decay": wd},
         {"params": [opt_p[n] for n in TENSORS if n not in DECAYED], "weight_decay": 0.0}],
        lr=0.0, betas=(float(meta["beta1"]), float(meta["beta2"])), eps=float(meta["eps"]))
    for s in range(int(meta["steps"])):
        pre = f"step{s}."
        print(f" {case} {pre[:-1]}")
        p = leaf_params(t, "" if s == 0 else f"step{s - 1}.param.")
        loss = 0.0
        for j in range(k):
            _, l = gpt2_loss(p, cfg, *batch(t, j))
            (l / k).backward()
            loss += l.item() / k
        chk.compare(case, pre + "loss", t[pre + "loss"], np.float64(loss), label="loss")
        for n in TENSORS:
            chk.compare(case, pre + "grad." + n, t[pre + "grad." + n], grad_of(p[n]), label="grad." + n)
        for n in TENSORS:
            opt_p[n].grad = torch.tensor(t[pre + "grad." + n], dtype=torch.float64)
        clip = float(meta["grad_clip"])
        norm = torch.nn.utils.clip_grad_norm_(list(opt_p.values()), clip)
        label = "grad_norm (clipped)" if norm.item() > clip else "grad_norm"
        chk.compare(case, pre + "grad_norm", t[pre + "grad_norm"], norm, label=label)
        lr = lr_at(meta, s)
        chk.compare(case, pre + "lr", t[pre + "lr"], np.float64(lr), bound=LR_RTOL * lr, label="lr")
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        for n in TENSORS:
            chk.compare(case, pre + "param." + n, t[pre + "param." + n], opt_p[n],
                        bound=OPT_TOL, label="param." + n)


def check_dir(d, expect_mismatch=None):
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    if not files:
        print(f"torch_reference.py: no .safetensors file in {d}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    chk = checker()
    perturbed_cases = set()
    for f in files:
        case = f[:-len(".safetensors")]
        meta, t = read_safetensors(os.path.join(d, f))
        cfg = {k: int(meta[k]) for k in ("layers", "heads", "channels", "max_seq_len", "vocab",
                                         "padded_vocab")}
        if "perturbed" in meta:
            perturbed_cases.add(case)
        print(f"case {case}: L{cfg['layers']} NH{cfg['heads']} C{cfg['channels']} "
              f"maxT{cfg['max_seq_len']} V{cfg['vocab']} Vp{cfg['padded_vocab']} "
              f"B{meta['batch']} T{meta['seq_len']}, spread_weights={meta['spread_weights']}, "
              f"weighted={meta['weighted']}, "
              f"micro-batches {meta['micro_batches']}, steps {meta['steps']}"
              + (f", perturbed {meta['perturbed']}" if "perturbed" in meta else ""))
        check_forward_backward(case, t, cfg, chk)
        if int(meta["steps"]) > 0:
            check_steps(case, meta, t, cfg, chk)

    if expect_mismatch is None:
        if chk.failures:
            case, name, err, bound = chk.failures[0]
            print(f"FAIL: {len(chk.failures)} tensor(s) over the bound; first: {case}/{name} "
                  f"max abs err {err:.3e} > {bound:g}")
            return 1
        print(f"PASS: every tensor of {len(files)} case(s) within its bound "
              f"({TOL:g} abs; AdamW parameters {OPT_TOL:g})")
        return 0
    # Negative control: exactly the perturbed tensor, in exactly the cases that say so.
    want = {(c, expect_mismatch) for c in perturbed_cases}
    got = {(c, n) for c, n, _, _ in chk.failures}
    if perturbed_cases and got == want:
        print(f"PASS (negative control): the perturbed {expect_mismatch} was reported in "
              f"{sorted(perturbed_cases)} and nothing else was")
        return 0
    print(f"FAIL (negative control): expected mismatches {sorted(want)}, got {sorted(got)}")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump_dir", nargs="?", help="a directory engine_dump wrote")
    ap.add_argument("--engine-dump", help="run this engine_dump binary into a temp dir first")
    ap.add_argument("--perturb", help="with --engine-dump: the tensor to perturb and expect reported")
    a = ap.parse_args()
    if (a.dump_dir is None) == (a.engine_dump is None) or (a.perturb and not a.engine_dump):
        ap.error("give DUMP_DIR or --engine-dump BIN (--perturb only with --engine-dump)")
    if a.dump_dir:
        return check_dir(a.dump_dir)
    with tempfile.TemporaryDirectory(prefix="loom-parity-") as d:
        cmd = [a.engine_dump, d] + (["--perturb", a.perturb] if a.perturb else [])
        if subprocess.run(cmd).returncode != 0:
            print(f"torch_reference.py: {' '.join(cmd)} failed", file=sys.stderr)
            return 2
        sys.stdout.flush()
        return check_dir(d, expect_mismatch=a.perturb)


if __name__ == "__main__":
    sys.exit(main())
