#!/usr/bin/env python3
"""PyTorch eager baseline for `scripts/gpu-bench.sh`: the zoo models of
`planner/src/zoo/` written out op for op (attention as in the zoo: no fused
kernels), FP32 (TF32 off), momentum SGD (lr 0.1, momentum 0.9, tofu plan's
default optimizer), soft labels with softmax cross-entropy averaged over the
batch dims. Prints one JSON line: {"model", "batch", "step_seconds": [...]}.

Usage: torch_baseline.py MODEL BATCH STEPS   (MODEL: mlp-L-H or gpt-L-D)
"""
import json
import math
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def soft_ce(logits, labels):
    # loss = mean over rows of sum_n labels_n * (lse - logits_n)
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    rows = logits.numel() // logits.shape[-1]
    return (labels * (lse - logits)).sum() / rows


def mlp(layers, hidden, batch, dev):
    ws = []
    for i in range(layers):
        w = (torch.randn(hidden, hidden, device=dev) * math.sqrt(2.0 / hidden)).requires_grad_()
        b = torch.zeros(hidden, device=dev, requires_grad=True)
        ws += [w, b]
    x = torch.randn(batch, hidden, device=dev)
    labels = torch.softmax(torch.randn(batch, hidden, device=dev), dim=-1)

    def loss():
        h = x
        for i in range(layers):
            h = h @ ws[2 * i] + ws[2 * i + 1]
            if i + 1 < layers:
                h = torch.relu(h)
        return soft_ce(h, labels)

    return ws, loss


def gpt(layers, d, batch, dev, seq=1024, vocab=50257):
    heads, dff = d // 64, 4 * d
    p = {}

    def W(name, shape, std):
        p[name] = (torch.randn(*shape, device=dev) * std).requires_grad_()

    def Z(name, shape, v):
        p[name] = torch.full(shape, v, device=dev, requires_grad=True)

    W("wte", (vocab, d), 0.5)
    W("wpe", (seq, d), 0.5)
    for l in range(layers):
        for n in ("ln1", "ln2"):
            Z(f"{l}.{n}.g", (d,), 1.0)
            Z(f"{l}.{n}.b", (d,), 0.0)
        for n, (i, o) in {"q": (d, d), "k": (d, d), "v": (d, d), "proj": (d, d),
                          "fc1": (d, dff), "fc2": (dff, d)}.items():
            W(f"{l}.{n}.w", (i, o), math.sqrt(2.0 / i))
            Z(f"{l}.{n}.b", (o,), 0.0)
    Z("lnf.g", (d,), 1.0)
    Z("lnf.b", (d,), 0.0)
    ids = torch.randint(0, vocab, (batch, seq), device=dev)
    pos = torch.arange(seq, device=dev).expand(batch, seq)
    labels = torch.softmax(torch.randn(batch, seq, vocab, device=dev), dim=-1)
    mask = torch.triu(torch.ones(seq, seq, device=dev, dtype=torch.bool), 1)

    def ln(x, n):
        return torch.nn.functional.layer_norm(x, (d,), p[n + ".g"], p[n + ".b"], 1e-5)

    def lin(x, n):
        return x @ p[n + ".w"] + p[n + ".b"]

    def split(x):
        return x.view(batch, seq, heads, d // heads).transpose(1, 2)

    def loss():
        x = p["wte"][ids] + p["wpe"][pos]
        for l in range(layers):
            h = ln(x, f"{l}.ln1")
            q, k, v = (split(lin(h, f"{l}.{n}")) for n in "qkv")
            a = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d // heads))
            a = a.masked_fill(mask, -1e9)
            a = torch.softmax(a, dim=-1)
            o = (a @ v).transpose(1, 2).reshape(batch, seq, d)
            x = x + lin(o, f"{l}.proj")
            h = ln(x, f"{l}.ln2")
            h = torch.nn.functional.gelu(lin(h, f"{l}.fc1"))
            x = x + lin(h, f"{l}.fc2")
        x = ln(x, "lnf")
        return soft_ce(x @ p["wte"].t(), labels)

    return list(p.values()), loss


def main():
    model, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dev = torch.device("cuda")
    kind, a, b = model.split("-")
    a, b = int(a), int(b.replace("k", "")) * (1024 if b.endswith("k") else 1)
    params, loss = (mlp if kind == "mlp" else gpt)(a, b, batch, dev)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"model": model, "batch": batch, "step_seconds": times}))


if __name__ == "__main__":
    main()
