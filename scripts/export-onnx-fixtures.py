#!/usr/bin/env python3
"""Export the models of issue 15's "GPU-made exports" as graph-only ONNX
fixtures for onnx/tests/exports.rs (no GPU needed: random weights on CPU).

Builds, with random weights (no download), BERT-base (transformers
BertModel), GPT-2 small (GPT2LMHeadModel, no KV cache), ViT-B/16 (timm
vit_base_patch16_224), ResNet-50 (timm resnet50) and a small LSTM language
model (embedding -> 2-layer LSTM -> linear), exports each with
torch.onnx.export — the dynamo exporter, torch's default since 2.9
(`dynamo=True`), at opset 18 — with the dynamic axes users declare (batch,
and sequence for the text models), saves the weights as external data
(`weights.bin`, tensors of 1 KiB and more) and then deletes the weights
file: only the graph is kept (without the exporter's per-node debugging
metadata). tofu plans from the graph alone (issue 15
item 6: initializer shapes are read, values only where folding needs them,
and small tensors stay inline).

Usage (from the repository root, in a virtual environment outside the repo):

    python3 -m venv /work/venv-export
    /work/venv-export/bin/pip install torch transformers timm onnx onnxscript
    /work/venv-export/bin/python scripts/export-onnx-fixtures.py onnx/tests/fixtures/exports

Writes DIR/<model>.onnx for each model and DIR/VERSIONS.txt (the package
versions used). `--only NAME` exports one model."""

import argparse
import os
import sys
import tempfile

import onnx
import torch

OPSET = 18


class LstmLm(torch.nn.Module):
    """Embedding -> 2-layer LSTM -> linear (a word-level language model)."""

    def __init__(self, vocab=10000, emb=256, hidden=512, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, emb)
        self.lstm = torch.nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return self.out(h)


def bert():
    from transformers import BertConfig, BertModel

    m = BertModel(BertConfig())  # bert-base-uncased's configuration
    ids = torch.randint(0, 30522, (2, 128))
    mask = torch.ones(2, 128, dtype=torch.int64)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    return (
        m,
        (ids, mask),
        ["input_ids", "attention_mask"],
        {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
    )


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(use_cache=False))  # gpt2 (small)
    ids = torch.randint(0, 50257, (2, 128))
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    return m, (ids,), ["input_ids"], {"input_ids": {0: batch, 1: seq}}


def vit():
    import timm

    m = timm.create_model("vit_base_patch16_224", pretrained=False)
    x = torch.randn(2, 3, 224, 224)
    return m, (x,), ["pixel_values"], {"x": {0: torch.export.Dim("batch")}}


def resnet():
    import timm

    m = timm.create_model("resnet50", pretrained=False)
    x = torch.randn(2, 3, 224, 224)
    return m, (x,), ["pixel_values"], {"x": {0: torch.export.Dim("batch")}}


def lstm_lm():
    m = LstmLm()
    ids = torch.randint(0, 10000, (2, 35))
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    return m, (ids,), ["input_ids"], {"ids": {0: batch, 1: seq}}


MODELS = {
    "bert-base": bert,
    "gpt2": gpt2,
    "vit-b16": vit,
    "resnet50": resnet,
    "lstm-lm": lstm_lm,
}


def export(name, build, out_dir):
    torch.manual_seed(0)
    model, args, input_names, dynamic = build()
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full.onnx")
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            opset_version=OPSET,
            input_names=input_names,
            dynamic_shapes=dynamic,
        )
        program.save(full, external_data=True)
        proto = onnx.load(full, load_external_data=True)
    # The exporter's per-node debugging metadata (stack traces with this
    # machine's paths, FX node text) is 90% of the graph's bytes; tofu reads
    # none of it.
    for node in proto.graph.node:
        del node.metadata_props[:]
    dest = os.path.join(out_dir, f"{name}.onnx")
    weights = os.path.join(out_dir, "weights.bin")
    onnx.save_model(
        proto,
        dest,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=1024,
    )
    os.remove(weights)  # graph only: tofu reads initializer shapes, not values
    print(f"{dest}: {os.path.getsize(dest)} bytes, {len(proto.graph.node)} nodes")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--only", choices=sorted(MODELS))
    a = p.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, build in MODELS.items():
        if a.only and name != a.only:
            continue
        export(name, build, a.out_dir)
    if not a.only:
        import importlib.metadata as md

        with open(os.path.join(a.out_dir, "VERSIONS.txt"), "w") as f:
            f.write(f"python {sys.version.split()[0]}\n")
            for pkg in ["torch", "transformers", "timm", "onnx", "onnxscript"]:
                f.write(f"{pkg} {md.version(pkg)}\n")
            f.write(f"exporter torch.onnx.export(dynamo=True), opset {OPSET}\n")


if __name__ == "__main__":
    main()
