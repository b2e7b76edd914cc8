#!/usr/bin/python3
"""scripts/check-export on a real checkpoint, and its negative controls (tests only).

  check_export_test.py CHECK_EXPORT LOOM_TRAINER EXPORT_CHECKPOINT LOOM

Trains a 2-layer, 64-wide GPT-2 for 10 steps on a licence text Debian ships
(loom-trainer train, a fresh data dir), exports its checkpoint as an HF
directory and a q8_0 GGUF file (export_checkpoint: libs/export's calls), and
runs CHECK_EXPORT on them: every check must pass. Then on damaged copies,
each of which must fail its own check (and only the ones it touches):
  one HF weight moved by 0.05     -> hf logits FAIL (and gguf: the HF side moved)
  one GGUF f32 value moved by 0.05 -> gguf FAIL, hf logits PASS
  tokenizer.json without its first merge " t" -> tokenizer FAIL
Exit status 0 when all of that holds.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

NPM = "/usr/local/lib/edgeloom/npm/node_modules"
DELTA = 0.05


def run(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


def must(argv, env=None):
    rc, out = run(argv, env)
    if rc != 0:
        sys.exit(f"check_export_test: {' '.join(argv[:3])} ... exited {rc}:\n{out}")
    return out


def verdicts(out):
    """{check name: PASS|FAIL|ERROR} from check-export's lines."""
    v = {}
    for line in out.splitlines():
        if line.startswith("check-export: "):
            words = line[len("check-export: "):].split()
            name = " ".join(words[:2]) if words[0] == "hf" else words[0]
            v[name] = words[2] if words[0] == "hf" else words[1]
    return v


def bump_f32(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        (x,) = struct.unpack("<f", f.read(4))
        f.seek(at)
        f.write(struct.pack("<f", x + DELTA))


def main():
    check, trainer, exporter, loom = sys.argv[1:5]
    root = os.path.dirname(os.path.dirname(os.path.abspath(check)))
    env = dict(os.environ, NODE_PATH=os.environ.get("NODE_PATH") or NPM,
               PATH=os.path.dirname(loom) + os.pathsep + os.path.dirname(trainer) + os.pathsep + os.environ["PATH"])
    failures = []
    with tempfile.TemporaryDirectory(prefix="loom-check-export-test-") as d:
        data, run_dir = os.path.join(d, "data"), os.path.join(d, "run")
        must([trainer, "train", "--config", os.path.join(root, "templates", "pretrain-tiny.toml"),
              "--set", "data.text=/usr/share/common-licenses/GPL-3", "--set", "model.layers=2",
              "--set", "model.heads=2", "--set", "model.channels=64", "--set", "model.max_seq_len=64",
              "--set", "train.seq_len=32", "--set", "train.steps=10", "--set", "optim.warmup_steps=0",
              "--set", "optim.lr=1e-2", "--set", "checkpoint.every_steps=10", "--set", "train.threads=1",
              "--out", run_dir, "--data-dir", data, "--quiet"])
        ckpt, hf, gguf = os.path.join(run_dir, "checkpoints"), os.path.join(d, "hf"), os.path.join(d, "m.gguf")
        must([exporter, ckpt, data, hf, gguf, "q8_0"])

        def checked(hf_dir, gguf_file):
            rc, out = run([check, hf_dir, gguf_file, ckpt, "--data-dir", data], env)
            print(out, end="")
            return rc, verdicts(out)

        print("== the export as written")
        rc, v = checked(hf, gguf)
        if rc != 0 or v != {"hf logits": "PASS", "gguf": "PASS", "tokenizer": "PASS"}:
            failures.append(f"the export as written: exit {rc}, {v}")

        print("== transformer.h.1.attn.c_proj.weight[middle] + 0.05 in model.safetensors")
        bad_hf = os.path.join(d, "hf-weight")
        shutil.copytree(hf, bad_hf)
        st = os.path.join(bad_hf, "model.safetensors")
        with open(st, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        begin, end = header["transformer.h.1.attn.c_proj.weight"]["data_offsets"]
        bump_f32(st, 8 + n + begin + (end - begin) // 8 * 4)
        rc, v = checked(bad_hf, gguf)
        if rc != 1 or v.get("hf logits") != "FAIL" or v.get("tokenizer") != "PASS":
            failures.append(f"a perturbed HF weight: exit {rc}, {v}")

        print("== position_embd.weight[100] + 0.05 in the GGUF file")
        bad_gguf = os.path.join(d, "value.gguf")
        shutil.copy(gguf, bad_gguf)
        must(["node", os.path.join(root, "tests", "export", "gguf_oracle.js"), gguf, os.path.join(d, "o.json"),
              os.path.join(d, "o.bin")], env)
        info = json.load(open(os.path.join(d, "o.json")))
        pos = next(t for t in info["tensorInfos"] if t["name"] == "position_embd.weight")  # f32 in every type
        bump_f32(bad_gguf, int(info["tensorDataOffset"]) + int(pos["offset"]) + 4 * 100)
        rc, v = checked(hf, bad_gguf)
        if rc != 1 or v != {"hf logits": "PASS", "gguf": "FAIL", "tokenizer": "PASS"}:
            failures.append(f"a perturbed GGUF value: exit {rc}, {v}")

        print("== tokenizer.json without GPT-2's first merge \" t\"")
        bad_tok = os.path.join(d, "hf-tokenizer")
        shutil.copytree(hf, bad_tok)
        tj_path = os.path.join(bad_tok, "tokenizer.json")
        tj = json.load(open(tj_path, encoding="utf-8"))
        merges = tj["model"]["merges"]
        first = next(i for i, m in enumerate(merges) if m in ("\u0120 t", ["\u0120", "t"]))
        del merges[first]
        json.dump(tj, open(tj_path, "w", encoding="utf-8"), ensure_ascii=False)
        rc, v = checked(bad_tok, gguf)
        if rc != 1 or v.get("tokenizer") != "FAIL" or v.get("hf logits") != "PASS":
            failures.append(f"a tokenizer.json without a merge: exit {rc}, {v}")

    for f in failures:
        print(f"check_export_test: FAILED: {f}")
    if not failures:
        print("check_export_test: the export passes, and each of the three damaged copies fails its check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
