#!/usr/bin/env python3
"""Bring your own model (issue 38): three models written in PyTorch itself,
exported with torch.onnx (the TorchScript exporter and the dynamo exporter),
trained by `tofu train MODEL.onnx --workers 2 --data F.safetensors`, against
PyTorch training the same model from the same initial weights on the same
batches with the same recipe (plain SGD).

The models:
  cnn   conv 3×3 → batch norm (exported in training mode) → GELU → max pool →
        conv 3×3 → batch norm → GELU → flatten → layer norm → linear, on
        scikit-learn's digits as [N, 1, 8, 8] images, int64 class ids [N];
  lstm  a one-layer LSTM over the 8 rows of each digit (8 steps of 8
        features) → the last hidden state → linear, int64 class ids [N];
  lm    a 2-layer causal transformer over bytes (token and position
        embeddings, pre-norm attention with a causal mask, GELU MLP, tied to
        nothing) on KJV windows: int64 ids [N, S] and next-byte targets
        [N, S].
Data: digits (`scripts/fetch-digits.sh`) and KJV (`scripts/fetch-kjv.sh`)
from tofu's cache, split here (seeded); the training part is written as
safetensors for tofu, the held-out part stays here.

Per model and exporter:
  1. tofu trains the export: `tofu train MODEL.onnx --workers 2 --data
     train.safetensors --weights MODEL.onnx --optimizer sgd --lr LR --steps N
     --held-out 0 --export-batches B.safetensors --save-onnx OUT.onnx --json`
     (its batches written out, its trained weights back in the model);
  2. PyTorch trains the same module from the same initial weights on those
     batches in float64: tofu's first 50 losses must equal PyTorch's within
     1e-4 relative;
  3. PyTorch trains it again in float32 (the recipe a user runs), is exported
     the same way, and both trained models score the held-out set through
     onnxruntime in batches of the export's batch: tofu's held-out accuracy
     within 2 points of PyTorch's (the LM: held-out loss within 5%).
Prints one table; exits 1 when a check fails, 2 on a setup problem. Run it
through scripts/byom-torch.sh, which installs PyTorch, onnx, onnxscript and
onnxruntime into a venv outside the tree (not in CI).

Usage: byom_torch.py [--tofu BIN] [--models cnn,lstm,lm]
                     [--exporters torchscript,dynamo] [--work DIR] [--json]
"""

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file

CACHE = os.environ.get("TOFU_DATA_CACHE", os.path.expanduser("~/.cache/tofu"))


def digits():
    path = os.path.join(CACHE, "sklearn-digits", "digits.csv")
    if not os.path.exists(path):
        sys.exit(f"byom: {path} is missing: run bash scripts/fetch-digits.sh")
    rows = np.loadtxt(path, delimiter=",", dtype=np.float64)
    x, y = (rows[:, :64] / 16.0).astype(np.float32), rows[:, 64].astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(len(y) * 0.8)
    return (x[order[:cut]], y[order[:cut]]), (x[order[cut:]], y[order[cut:]])


def kjv(seq, train_bytes=400_000):
    path = os.path.join(CACHE, "kjv", "kjv.txt")
    if not os.path.exists(path):
        sys.exit(f"byom: {path} is missing: run bash scripts/fetch-kjv.sh")
    data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8).astype(np.int64)
    held = data[int(len(data) * 0.9):][: train_bytes // 8]

    def windows(d):
        n = (len(d) - 1) // seq
        return d[: n * seq].reshape(n, seq), d[1 : n * seq + 1].reshape(n, seq)

    return windows(data[:train_bytes]), windows(held)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.norm = nn.LayerNorm(16 * 4 * 4)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        h = F.max_pool2d(F.gelu(self.bn1(self.conv1(x))), 2)
        h = F.gelu(self.bn2(self.conv2(h)))
        return self.fc(self.norm(torch.flatten(h, 1)))


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, batch_first=True)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


class Lm(nn.Module):
    def __init__(self, seq, vocab=256, d=64, heads=4, layers=2):
        super().__init__()
        self.heads, self.d = heads, d
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(
                nn.ModuleDict(
                    dict(
                        ln1=nn.LayerNorm(d),
                        qkv=nn.Linear(d, 3 * d),
                        proj=nn.Linear(d, d),
                        ln2=nn.LayerNorm(d),
                        fc1=nn.Linear(d, 4 * d),
                        fc2=nn.Linear(4 * d, d),
                    )
                )
            )
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        mask = torch.triu(torch.full((seq, seq), -1e9), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)
        # Distinct LayerNorm parameters: the dynamo exporter's optimizer
        # (optimize=True) merges initializers of equal values (every
        # LayerNorm's ones and zeros) into one tensor, which then trains as
        # one shared parameter. The export below uses optimize=False; the
        # perturbation keeps the model the same either way.
        with torch.no_grad():
            for mod in self.modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.weight.add_(0.01 * torch.randn_like(mod.weight))
                    mod.bias.add_(0.01 * torch.randn_like(mod.bias))

    def forward(self, ids):
        b, s = ids.shape
        h, dh = self.heads, self.d // self.heads
        x = self.tok(ids) + self.pos
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(self.d, dim=-1)
            q, k, v = (t.reshape(b, s, h, dh).transpose(1, 2) for t in (q, k, v))
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh) + self.mask.to(q.dtype), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, self.d)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.head(self.ln_f(x))


# name, module, input name, data, batch, steps, lr
SEQ = 32


def models():
    return {
        "cnn": dict(make=Cnn, input="x", shape=(1, 8, 8), data="digits", batch=32, steps=300, lr=0.1,
                    optimize=False),
        "lstm": dict(make=Lstm, input="x", shape=(8, 8), data="digits", batch=32, steps=400, lr=0.5),
        "lm": dict(make=lambda: Lm(SEQ), input="ids", shape=(SEQ,), data="kjv", batch=16, steps=300, lr=0.3,
                   optimize=False),
    }


def export(model, example, path, input_name, exporter, optimize=True):
    model.train()
    kwargs = dict(input_names=[input_name], output_names=["logits"])
    if exporter == "torchscript":
        torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, **kwargs)
    else:
        # optimize=False: the dynamo exporter's optimizer folds batch norm
        # into the convolutions (inference mode) and merges equal
        # initializers; without it tofu trains BatchNormalization nodes on
        # the batch's statistics, as PyTorch's train() does, and imports
        # torch.split as SplitToSequence + SequenceAt.
        torch.onnx.export(model, (example,), path, dynamo=True, optimize=optimize, **kwargs)


def tofu_train(tofu, work, cfg, model_path, train_file):
    batches = os.path.join(work, "batches.safetensors")
    trained = os.path.join(work, "trained.onnx")
    args = [tofu, "train", model_path, "--workers", "2", "--data", train_file,
            "--input", f"{cfg['input']}={cfg['input']}", "--input", "loss.labels=labels",
            "--weights", model_path, "--optimizer", "sgd", "--lr", str(cfg["lr"]),
            "--steps", str(cfg["steps"]), "--batch", str(cfg["batch"]), "--held-out", "0",
            "--export-batches", batches, "--save-onnx", trained, "--json"]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        return None, None, None, (run.stderr.strip().splitlines() or ["?"])[-12:]
    losses = []
    for line in run.stdout.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if "loss" in v and "step" in v:
            losses.append(float(v["loss"]))
    return losses, load_file(batches), trained, None


def torch_train(model, cfg, batches, dtype):
    m = copy.deepcopy(model).to(dtype)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=cfg["lr"])
    losses = []
    xs = batches[cfg["input"]]
    ys = batches["labels"] if "labels" in batches else batches["loss.labels"]
    for s in range(cfg["steps"]):
        x = torch.from_numpy(xs[s]).reshape((cfg["batch"],) + cfg["shape"])
        x = x.long() if cfg["input"] == "ids" else x.to(dtype)
        y = torch.from_numpy(ys[s]).long().reshape(-1)
        logits = m(x)
        loss = F.cross_entropy(logits.reshape(y.shape[0], -1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return m, losses


def score(path, cfg, test):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x, y = test
    b = cfg["batch"]
    total, right, count = 0.0, 0, 0
    for i in range(0, len(y) - b + 1, b):
        xb = x[i : i + b].reshape((b,) + cfg["shape"])
        xb = xb.astype(np.int64) if cfg["input"] == "ids" else xb.astype(np.float32)
        logits = sess.run(None, {name: xb})[0].astype(np.float64)
        logits = logits.reshape(-1, logits.shape[-1])
        yb = y[i : i + b].reshape(-1)
        mx = logits.max(-1, keepdims=True)
        lse = (mx[:, 0] + np.log(np.exp(logits - mx).sum(-1)))
        total += float((lse - logits[np.arange(len(yb)), yb]).sum())
        right += int((logits.argmax(-1) == yb).sum())
        count += len(yb)
    return total / count, right / count


def one(tofu, name, cfg, exporter, root):
    work = os.path.join(root, f"{name}-{exporter}")
    os.makedirs(work, exist_ok=True)
    if cfg["data"] == "digits":
        (xtr, ytr), test = digits()
        xtr = xtr.reshape((len(ytr),) + cfg["shape"])
        test = (test[0].reshape((len(test[1]),) + cfg["shape"]), test[1])
        train = {cfg["input"]: xtr, "labels": ytr}
    else:
        (itr, ltr), test = kjv(SEQ)
        train = {"ids": itr, "labels": ltr}
    train_file = os.path.join(work, "train.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in train.items()}, train_file)
    torch.manual_seed(0)
    model = cfg["make"]()
    example = torch.from_numpy(np.ascontiguousarray(train[cfg["input"]][: cfg["batch"]]))
    model_path = os.path.join(work, "model.onnx")
    row = dict(model=name, exporter=exporter)
    try:
        export(model, example, model_path, cfg["input"], exporter, cfg.get("optimize", True))
    except Exception as e:  # noqa: BLE001 (an exporter failure is a row, not a crash)
        row["error"] = f"export: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return row
    losses, batches, trained, err = tofu_train(tofu, work, cfg, model_path, train_file)
    if err:
        row["error"] = "tofu: " + " | ".join(err)
        return row
    _, ref = torch_train(model, cfg, batches, torch.float64)
    n = min(50, len(losses), len(ref))
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses[:n], ref[:n]))
    row.update(steps=len(losses), first_losses_max_rel=rel, first_loss_tofu=losses[0], first_loss_torch=ref[0])
    torch32, _ = torch_train(model, cfg, batches, torch.float32)
    torch_path = os.path.join(work, "torch-trained.onnx")
    export(torch32, example, torch_path, cfg["input"], exporter, cfg.get("optimize", True))
    row["tofu_loss"], row["tofu_acc"] = score(trained, cfg, test)
    row["torch_loss"], row["torch_acc"] = score(torch_path, cfg, test)
    if name == "lm":
        row["ok"] = rel <= 1e-4 and abs(row["tofu_loss"] - row["torch_loss"]) <= 0.05 * row["torch_loss"]
    else:
        row["ok"] = rel <= 1e-4 and abs(row["tofu_acc"] - row["torch_acc"]) <= 0.02
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tofu", default="target/release/tofu")
    ap.add_argument("--models", default="cnn,lstm,lm")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.tofu):
        print(f"byom: no tofu binary at {a.tofu} (cargo build --release)", file=sys.stderr)
        return 2
    root = a.work or tempfile.mkdtemp(prefix="tofu-byom-")
    cfgs = models()
    rows = []
    for name in a.models.split(","):
        for exporter in a.exporters.split(","):
            row = one(os.path.abspath(a.tofu), name, cfgs[name], exporter, root)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"torch {torch.__version__}; tofu {a.tofu}; work {root}")
    print("| model | exporter | steps | first 50 losses, max rel. diff | held-out tofu | held-out PyTorch | ok |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['exporter']} | — | {r['error']} | | | no |")
            continue
        held = lambda w: f"loss {r[w + '_loss']:.4f}, acc {r[w + '_acc']:.4f}"
        print(f"| {r['model']} | {r['exporter']} | {r['steps']} | {r['first_losses_max_rel']:.2e} | "
              f"{held('tofu')} | {held('torch')} | {'yes' if r['ok'] else 'no'} |")
    if a.json:
        print(json.dumps(rows))
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
