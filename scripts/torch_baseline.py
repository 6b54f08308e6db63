#!/usr/bin/env python3
"""PyTorch eager baseline for `scripts/gpu-bench.sh` and `scripts/bench-cpu.sh`:
the zoo models of `planner/src/zoo/` written out op for op (attention as in
the zoo: no fused kernels), FP32 (TF32 off), momentum SGD (lr 0.1, momentum
0.9, tofu plan's default optimizer), soft labels with softmax cross-entropy
averaged over the batch dims. Also the models of two ONNX exports in
`onnx/tests/fixtures/exports/`, trained as tofu trains an ONNX model
(`onnx/src/loss.rs`: softmax cross-entropy with soft labels on the first
output): `resnet50` (torchvision's ResNet-50, the export's architecture,
without BatchNorm: the eval-mode export has neither BatchNormalization nor
convolution biases; 25,503,912 parameters, as `tofu graph` counts) and
`bert-base` (transformers' BertModel, bert-base-uncased's configuration,
written out op for op; the loss is on last_hidden_state, sequence 128 as tofu
defaults it).
Prints one JSON line: {"model", "batch", "device", "threads", "step_seconds": [...]}.

Usage: torch_baseline.py MODEL BATCH STEPS [--device cpu|cuda] [--threads N]
  MODEL: mlp-L-H, gpt-L-D, resnet50 or bert-base; --device defaults to cuda
  when available, else cpu; --threads (CPU, torch.set_num_threads) defaults
  to the CPUs this process may use (nproc).
"""
import argparse
import json
import math
import os
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


def transformer_parts(p, batch, seq, d, heads, eps):
    """Layer norm, linear layer and head split over the parameters `p` (by
    name: `NAME.g`/`NAME.b`, `NAME.w`/`NAME.b`), shared by GPT and BERT."""

    def ln(x, n):
        return torch.nn.functional.layer_norm(x, (d,), p[n + ".g"], p[n + ".b"], eps)

    def lin(x, n):
        return x @ p[n + ".w"] + p[n + ".b"]

    def split(x):
        return x.view(batch, seq, heads, d // heads).transpose(1, 2)

    return ln, lin, split


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
        for n, (i, o) in {"qkv": (d, 3 * d), "proj": (d, d),
                          "fc1": (d, dff), "fc2": (dff, d)}.items():
            W(f"{l}.{n}.w", (i, o), math.sqrt(2.0 / i))
            Z(f"{l}.{n}.b", (o,), 0.0)
    Z("lnf.g", (d,), 1.0)
    Z("lnf.b", (d,), 0.0)
    ids = torch.randint(0, vocab, (batch, seq), device=dev)
    pos = torch.arange(seq, device=dev).expand(batch, seq)
    labels = torch.softmax(torch.randn(batch, seq, vocab, device=dev), dim=-1)
    mask = torch.triu(torch.ones(seq, seq, device=dev, dtype=torch.bool), 1)

    ln, lin, split = transformer_parts(p, batch, seq, d, heads, 1e-5)

    def loss():
        x = p["wte"][ids] + p["wpe"][pos]
        for l in range(layers):
            h = ln(x, f"{l}.ln1")
            # The zoo's fused, head-interleaved QKV (Megatron-LM's layout:
            # column h·3·DH + which·DH + d).
            qkv = lin(h, f"{l}.qkv").view(batch, seq, heads, 3, d // heads)
            q, k, v = qkv.permute(3, 0, 2, 1, 4).unbind(0)
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


def resnet50(batch, dev):
    import torchvision

    m = torchvision.models.resnet50()
    for mod in list(m.modules()):
        for name, child in mod.named_children():
            if isinstance(child, torch.nn.BatchNorm2d):
                setattr(mod, name, torch.nn.Identity())
    m.to(dev).train()
    x = torch.randn(batch, 3, 224, 224, device=dev)
    labels = torch.softmax(torch.randn(batch, 1000, device=dev), dim=-1)
    return list(m.parameters()), lambda: soft_ce(m(x), labels)


def bert_base(batch, dev, seq=128, d=768, layers=12, dff=3072, vocab=30522):
    heads = d // 64
    p = {}

    def P(name, *shape, std=0.02):
        p[name] = (torch.randn(*shape, device=dev) * std).requires_grad_()

    def LN(name):
        p[name + ".g"] = torch.ones(d, device=dev, requires_grad=True)
        p[name + ".b"] = torch.zeros(d, device=dev, requires_grad=True)

    def Lin(name, i, o):
        P(name + ".w", i, o)
        p[name + ".b"] = torch.zeros(o, device=dev, requires_grad=True)

    P("word", vocab, d)
    P("pos", 512, d)
    P("type", 2, d)
    LN("emb.ln")
    for l in range(layers):
        for n, (i, o) in {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d),
                          "fc1": (d, dff), "fc2": (dff, d)}.items():
            Lin(f"{l}.{n}", i, o)
        LN(f"{l}.ln1")
        LN(f"{l}.ln2")
    Lin("pool", d, d)
    ids = torch.randint(0, vocab, (batch, seq), device=dev)
    mask = torch.ones(batch, seq, device=dev, dtype=torch.int64)
    labels = torch.softmax(torch.randn(batch, seq, d, device=dev), dim=-1)

    ln, lin, split = transformer_parts(p, batch, seq, d, heads, 1e-12)

    def loss():
        x = ln(p["word"][ids] + p["pos"][:seq] + p["type"][0], "emb.ln")
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for l in range(layers):
            q, k, v = (split(lin(x, f"{l}.{n}")) for n in "qkv")
            a = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(d // heads) + bias, dim=-1)
            o = (a @ v).transpose(1, 2).reshape(batch, seq, d)
            x = ln(x + lin(o, f"{l}.o"), f"{l}.ln1")
            h = torch.nn.functional.gelu(lin(x, f"{l}.fc1"))
            x = ln(x + lin(h, f"{l}.fc2"), f"{l}.ln2")
        torch.tanh(lin(x[:, 0], "pool"))  # pooler_output, as the export computes it
        return soft_ce(x, labels)

    return list(p.values()), loss


def build(model, batch, dev):
    if model == "resnet50":
        return resnet50(batch, dev)
    if model == "bert-base":
        return bert_base(batch, dev)
    kind, a, b = model.split("-")
    a, b = int(a), int(b.replace("k", "")) * (1024 if b.endswith("k") else 1)
    return (mlp if kind == "mlp" else gpt)(a, b, batch, dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cpu":
        torch.set_num_threads(args.threads)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    params, loss = build(args.model, args.batch, dev)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    times = []
    for _ in range(args.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"model": args.model, "batch": args.batch, "device": dev.type,
                      "threads": torch.get_num_threads() if dev.type == "cpu" else None,
                      "parameters": sum(t.numel() for t in params), "step_seconds": times}))


if __name__ == "__main__":
    main()
