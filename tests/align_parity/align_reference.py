#!/usr/bin/python3
"""The alignment losses over the engine against a float64 PyTorch reference (tests only).

Reads the safetensors files align_dump writes and recomputes, from the dumped
weights and batch, with autograd:
  dpo / ipo  per-token log-probs of the policy, both models' response log-prob
             sums, the loss, dL/dπ per row and every policy gradient;
  bt         the rewards r = w·h + b at each row's last token, the
             Bradley–Terry loss, dL/dr, every backbone gradient and the head's.
Bound: every tensor within REL = 1e-5 of its largest magnitude (max abs error
<= 1e-5 · max|ref|), every scalar within 1e-5 relative; accuracies exactly
(to fp32 rounding). A gradient's scale is at least 1% of the case's largest
gradient (GRAD_FLOOR: Bradley–Terry's head bias and ln_f bias gradients are
zero in exact arithmetic).

  align_reference.py DUMP_DIR
  align_reference.py --align-dump BIN [--perturb NAME]
      with --perturb, the negative control: BIN moves NAME by 1e-4 of its
      largest magnitude; passes only if NAME, and nothing else, is reported
      in every case that holds it.

Exit status: 0 pass, 1 a mismatch, 2 an environment or input error.
Runs under Debian's /usr/bin/python3 (python3-torch, python3-numpy).
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine_parity"))
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_reference import TENSORS, read_safetensors
except ImportError as e:
    print(f"align_reference.py: {e}: this test needs Debian's python3-torch and python3-numpy "
          f"for {sys.executable} (scripts/setup installs them)", file=sys.stderr)
    sys.exit(2)

REL = 1e-5
EXACT = 1e-7  # accuracies: k/P, exact up to their fp32 rounding
# Some gradients are zero in exact arithmetic: Bradley–Terry only sees
# r_c − r_r, so dL/db = Σ dL/dr = 0 and ln_f's bias gradient is w·Σ dL/dr = 0.
# Their fp32 values are rounding noise (~1e-8); every gradient tensor is
# therefore measured against at least GRAD_FLOOR × the case's largest gradient.
GRAD_FLOOR = 1e-2


def backbone(p, cfg, inputs):
    """The output of ln_f (B,T,C), straight from the GPT-2 formulas."""
    B, T = inputs.shape
    L, NH, C = cfg["layers"], cfg["heads"], cfg["channels"]
    hs = C // NH
    x = p["wte"][inputs] + p["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        q, k, v = (h @ p["qkvw"][l].T + p["qkvb"][l]).split(C, dim=-1)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hs)).masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ p["attprojw"][l].T + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        x = x + F.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh") @ p["fcprojw"][l].T + p["fcprojb"][l]
    return F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)


def token_logprobs(p, cfg, inputs, targets):
    """log p(target) per token (B,T); the softmax covers the V real tokens."""
    logits = backbone(p, cfg, inputs) @ p["wte"].T
    lp = logits[..., :cfg["vocab"]].log_softmax(-1)
    return lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def params(t, prefix="", grad=True):
    return {n: torch.tensor(t[prefix + n], dtype=torch.float64, requires_grad=grad) for n in TENSORS}


class checker:
    def __init__(self):
        self.failures = []

    def compare(self, case, name, engine, ref, exact=False, floor=0.0):
        e = np.asarray(engine, dtype=np.float64)
        r = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref, np.float64)
        if e.shape != r.shape:
            self.failures.append((case, name, math.inf))
            print(f"  {name:<18} shape {e.shape} != reference {r.shape}  FAIL")
            return
        scale = max(float(np.max(np.abs(r))) if r.size else 0.0, floor)
        err = float(np.max(np.abs(e - r))) if e.size else 0.0
        rel = err / scale if scale > 0 else err
        ok = err <= EXACT if exact else rel <= REL
        if not ok:
            self.failures.append((case, name, rel))
        print(f"  {name:<18} {str(tuple(e.shape)):<10} scale {scale:.3e}  max abs err {err:.3e}"
              f"  rel {rel:.2e}{'' if ok else '  FAIL'}")


def check_preference(case, meta, t, cfg, chk):
    P, beta = int(meta["pairs"]), float(meta["beta"])
    inputs = torch.tensor(t["inputs"], dtype=torch.long)
    targets = torch.tensor(t["targets"], dtype=torch.long)
    mask = torch.tensor(t["mask"], dtype=torch.float64)
    p = params(t)
    with torch.no_grad():
        ref_seq = (token_logprobs(params(t, "ref.", False), cfg, inputs, targets) * mask).sum(-1)
    tok = token_logprobs(p, cfg, inputs, targets)
    pi_seq = (tok * mask).sum(-1)
    pi_seq.retain_grad()
    h = (pi_seq[:P] - ref_seq[:P]) - (pi_seq[P:] - ref_seq[P:])
    if meta["kind"] == "dpo":
        loss = -F.logsigmoid(beta * h).mean()
    else:
        loss = ((h - 1.0 / (2.0 * beta)) ** 2).mean()
    loss.backward()
    chk.compare(case, "token_logprobs", t["token_logprobs"], tok)
    chk.compare(case, "pi_seq", t["pi_seq"], pi_seq)
    chk.compare(case, "ref_seq", t["ref_seq"], ref_seq)
    chk.compare(case, "loss", t["loss"], loss)
    chk.compare(case, "d_seq", t["d_seq"], pi_seq.grad)
    acc = ((h > 0).double() + 0.5 * (h == 0).double()).mean()
    chk.compare(case, "accuracy", t["accuracy"], acc, exact=True)
    chk.compare(case, "reward_margin", t["reward_margin"], (beta * h).mean())
    compare_grads(case, t, p, {}, chk)


def grad_of(x):
    return x.grad if x.grad is not None else torch.zeros_like(x)


def compare_grads(case, t, p, extra, chk):
    """Every parameter gradient, each measured against at least GRAD_FLOOR of the largest."""
    grads = {"grad." + n: grad_of(p[n]) for n in TENSORS}
    grads.update({k: grad_of(v) for k, v in extra.items()})
    floor = GRAD_FLOOR * max(float(g.abs().max()) for g in grads.values())
    for name, g in grads.items():
        chk.compare(case, name, t[name], g, floor=floor)


def check_reward(case, meta, t, cfg, chk):
    P = int(meta["pairs"])
    inputs = torch.tensor(t["inputs"], dtype=torch.long)
    last = torch.tensor(t["last"], dtype=torch.long)
    p = params(t)
    w = torch.tensor(t["head.w"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(t["head.b"], dtype=torch.float64, requires_grad=True)
    hid = backbone(p, cfg, inputs)
    r = hid[torch.arange(2 * P), last] @ w + b
    r.retain_grad()
    loss = -F.logsigmoid(r[:P] - r[P:]).mean()
    loss.backward()
    chk.compare(case, "rewards", t["rewards"], r)
    chk.compare(case, "loss", t["loss"], loss)
    chk.compare(case, "d_r", t["d_r"], r.grad)
    d = r[:P] - r[P:]
    chk.compare(case, "accuracy", t["accuracy"], ((d > 0).double() + 0.5 * (d == 0).double()).mean(), exact=True)
    chk.compare(case, "margin", t["margin"], d.mean())
    compare_grads(case, t, p, {"grad.head.w": w, "grad.head.b": b}, chk)


def check_dir(d, expect=None):
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    if not files:
        print(f"align_reference.py: no .safetensors file in {d}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    chk = checker()
    perturbed = set()
    for f in files:
        case = f[:-len(".safetensors")]
        meta, t = read_safetensors(os.path.join(d, f))
        cfg = {k: int(meta[k]) for k in ("layers", "heads", "channels", "max_seq_len", "vocab", "padded_vocab")}
        if "perturbed" in meta:
            perturbed.add(case)
        print(f"case {case}: {meta['kind']} L{cfg['layers']} NH{cfg['heads']} C{cfg['channels']} V{cfg['vocab']} "
              f"Vp{cfg['padded_vocab']} pairs {meta['pairs']} T {meta['seq_len']}"
              + (f", perturbed {meta['perturbed']}" if "perturbed" in meta else ""))
        (check_reward if meta["kind"] == "bt" else check_preference)(case, meta, t, cfg, chk)
    if expect is None:
        if chk.failures:
            case, name, rel = chk.failures[0]
            print(f"FAIL: {len(chk.failures)} value(s) over the bound; first: {case}/{name} rel {rel:.3e} > {REL:g}")
            return 1
        print(f"PASS: every value of {len(files)} case(s) within {REL:g} relative (accuracies exact)")
        return 0
    want = {(c, expect) for c in perturbed}
    got = {(c, n) for c, n, _ in chk.failures}
    if perturbed and got == want:
        print(f"PASS (negative control): the perturbed {expect} was reported in {sorted(perturbed)} and nothing else was")
        return 0
    print(f"FAIL (negative control): expected mismatches {sorted(want)}, got {sorted(got)}")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump_dir", nargs="?")
    ap.add_argument("--align-dump")
    ap.add_argument("--perturb")
    a = ap.parse_args()
    if (a.dump_dir is None) == (a.align_dump is None) or (a.perturb and not a.align_dump):
        ap.error("give DUMP_DIR or --align-dump BIN (--perturb only with --align-dump)")
    if a.dump_dir:
        return check_dir(a.dump_dir)
    with tempfile.TemporaryDirectory(prefix="loom-align-parity-") as d:
        cmd = [a.align_dump, d] + (["--perturb", a.perturb] if a.perturb else [])
        try:
            rc = subprocess.run(cmd).returncode
        except OSError as e:
            print(f"align_reference.py: {e}", file=sys.stderr)
            return 2
        if rc != 0:
            print(f"align_reference.py: {' '.join(cmd)} failed", file=sys.stderr)
            return 2
        sys.stdout.flush()
        return check_dir(d, expect=a.perturb)


if __name__ == "__main__":
    sys.exit(main())
