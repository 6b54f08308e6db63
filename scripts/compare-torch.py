#!/usr/bin/env python3
"""The same loss curve as PyTorch (issue 27): tofu's zoo MLP trained by
`tofu train` and by PyTorch eager from the same initial weights on the same
batches; prints both losses per step and fails if any of the first STEPS
differs by more than 1e-4 relative.

tofu writes the initial weights (`tofu train --steps 0 --save-weights`,
safetensors by graph name: fc<i>.w[in, out], fc<i>.b[out]) and the batches
of its run (`--export-batches`: x[steps, batch, 64], labels[steps, batch,
1] class ids; one-hot [steps, batch, 10] from older tofu builds); the
PyTorch model is x @ w + b with ReLU between layers and the mean softmax
cross-entropy (`F.cross_entropy` at the class ids, tofu's `cross_entropy`), and
plain SGD (`torch.optim.SGD`, tofu's `sgd_update`).

Usage (a developer's machine, not CI; digits from scripts/fetch-digits.sh):
  ~/.cache/tofu/torch-cpu/venv/bin/python scripts/compare-torch.py \
      [--tofu target/release/tofu] [--model mlp-3-256] [--workers 4] \
      [--steps 50] [--lr 0.1] [--batch 64]
The venv is the one scripts/bench-cpu.sh installs PyTorch into; this script
pip-installs the `safetensors` package into it when missing.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def need_safetensors():
    try:
        import packaging  # noqa: F401  (safetensors.torch imports it)
        import safetensors  # noqa: F401
    except ImportError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "-q", "safetensors==0.6.2", "packaging"]
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tofu", default="target/release/tofu")
    ap.add_argument("--model", default="mlp-3-256")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    need_safetensors()
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(os.cpu_count() or 1)
    common = [
        a.tofu, "train", "--model", a.model, "--workers", str(a.workers),
        "--data", "digits", "--batch", str(a.batch), "--lr", str(a.lr),
        "--seed", str(a.seed),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.safetensors")
        batches = os.path.join(tmp, "batches.safetensors")
        subprocess.run(common + ["--steps", "0", "--save-weights", init], check=True)
        out = subprocess.run(
            common + ["--steps", str(a.steps), "--export-batches", batches, "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        tofu = [json.loads(l)["loss"] for l in out.splitlines() if '"step"' in l]
        w = load_file(init)
        data = load_file(batches)
    layers = len([k for k in w if k.endswith(".w")])
    params = []
    for i in range(layers):
        params += [w[f"fc{i}.w"].double().requires_grad_(), w[f"fc{i}.b"].double().requires_grad_()]
    opt = torch.optim.SGD(params, lr=a.lr)
    torch_losses = []
    for s in range(a.steps):
        h = data["x"][s].double()
        for i in range(layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i + 1 < layers:
                h = torch.relu(h)
        labels = data["labels"][s]
        target = labels.reshape(-1).long() if labels.shape[-1] == 1 else labels.argmax(-1)
        loss = torch.nn.functional.cross_entropy(h, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_losses.append(loss.item())
    worst = 0.0
    print(f"{'step':>4}  {'tofu':>12}  {'pytorch':>12}  rel. diff")
    for s, (t, p) in enumerate(zip(tofu, torch_losses)):
        rel = abs(t - p) / max(abs(p), 1e-12)
        worst = max(worst, rel)
        print(f"{s:>4}  {t:>12.7f}  {p:>12.7f}  {rel:.2e}")
    ok = len(tofu) == a.steps and worst <= 1e-4
    print(f"{a.model}, {a.workers} workers, {a.steps} steps: largest relative difference {worst:.2e} ({'ok' if ok else 'FAILED'}: ≤ 1e-4)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
