#!/usr/bin/env python3
"""tofu's forward pass against onnxruntime's (issue 26): runs an ONNX model
in onnxruntime on the values a `tofu run --save-outputs` run used, and
prints per graph output the relative error of tofu's output; exits 1 when
one is above the tolerance (1e-4), 2 on a usage or input problem.

tofu writes (`tofu run PLAN --weights MODEL.onnx --save-outputs OUT.safetensors`)
the model's outputs by their ONNX names, and the seeded synthetic inputs
and weights it ran on when none were given; this script feeds onnxruntime
those inputs and puts those weights in place of the model's initializers of
the same names (so a graph-only export, whose external weight data is not
there, runs on tofu's synthetic weights), then compares. Weights that are
no initializers (in `Constant` nodes or `If` branches, as Paddle's and
spox's exporters write them) cannot be substituted: run tofu with
`--weights MODEL.onnx` for such a model (the script refuses a file with
synthetic values it cannot give onnxruntime). tofu's forward
of a training plan is a training step's (its file says so in the metadata
`tofu.forward`): batch normalization on the batch's statistics, dropout as
the identity; the script rewrites the model's inference-mode
BatchNormalization nodes to match (ONNX Runtime's Dropout is already the
identity in inference).

The error is normwise, as `tofu run --verify` measures it
(runner/src/verify.rs): ||tofu - ort||_2 / max(||ort||_2, 1e-3 * sqrt(n));
the element-wise largest |tofu - ort| / max(|ort|, 1e-6) is printed beside
it for information.

Usage (`--setup` only creates the venv; scripts/fetch-onnxruntime.sh, which
scripts/test.sh runs, calls it):
  python3 scripts/compare-onnxruntime.py --setup
  python3 scripts/compare-onnxruntime.py MODEL.onnx OUT.safetensors [--tolerance 1e-4] [--json]
      [--input-value NAME=V[,V...]]   (an input the plan fixed with `tofu plan --input-value`)
onnxruntime, onnx, safetensors and numpy are pip-installed into the venv
~/.cache/tofu/ort-venv on first use (the script then re-runs itself there).
"""

import argparse
import json
import os
import subprocess
import sys

VENV = os.path.expanduser("~/.cache/tofu/ort-venv")
PACKAGES = ["onnxruntime==1.32.0", "onnx==1.23.2", "safetensors==0.8.0", "numpy==2.4.6"]


def ensure_venv():
    """Re-run this script under the venv's python, creating it if needed."""
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import safetensors  # noqa: F401

        return
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.environ.get("TOFU_ORT_VENV_TRIED"):
        fail(f"the venv {VENV} lacks {' '.join(PACKAGES)} after installing them: remove it and run again")
    os.environ["TOFU_ORT_VENV_TRIED"] = "1"
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        subprocess.check_call([py, "-m", "pip", "install", "-q", *PACKAGES])
        os.execv(py, [py, *sys.argv])
    else:
        if not os.path.exists(py):
            subprocess.check_call([sys.executable, "-m", "venv", VENV])
            subprocess.check_call([py, "-m", "pip", "install", "-q", *PACKAGES])
        os.execv(py, [py, *sys.argv])


def batchnorm_on_batch_statistics(model):
    """Rewrite each inference-mode BatchNormalization node as the same
    normalization on the batch's statistics (mean and biased variance over
    every axis but the channels), which is what a training step computes
    and so what tofu's forward of a training plan holds. Gives the names of
    the rewritten nodes' inputs."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in [*inferred.value_info, *inferred.input]}
    except Exception:  # noqa: BLE001 (shape inference is a convenience here)
        ranks = {}
    nodes, rewritten = [], []
    for i, n in enumerate(g.node):
        training = any(a.name == "training_mode" and a.i for a in n.attribute)
        if n.op_type != "BatchNormalization" or training or len([o for o in n.output if o]) > 1:
            nodes.append(n)
            continue
        rewritten.append(n.input[0])
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        rank = ranks.get(n.input[0], 4) or 4
        axes = [0, *range(2, rank)]
        p = f"_tofu_bn{i}_"
        consts = [
            numpy_helper.from_array(np.array(eps, np.float32), p + "eps"),
            numpy_helper.from_array(np.array([-1] + [1] * (rank - 2), np.int64), p + "shape"),
        ]
        if opset >= 18:
            consts.append(numpy_helper.from_array(np.array(axes, np.int64), p + "axes"))
        g.initializer.extend(consts)
        if model.ir_version < 4:
            # Before IR 4 every initializer is also a graph input.
            g.input.extend(helper.make_tensor_value_info(c.name, c.data_type, list(c.dims)) for c in consts)

        def mean(x, out):
            if opset >= 18:
                return helper.make_node("ReduceMean", [x, p + "axes"], [out], keepdims=1)
            return helper.make_node("ReduceMean", [x], [out], axes=axes, keepdims=1)

        x, scale, bias = n.input[0], n.input[1], n.input[2]
        nodes += [
            mean(x, p + "m"),
            helper.make_node("Sub", [x, p + "m"], [p + "d"]),
            helper.make_node("Mul", [p + "d", p + "d"], [p + "d2"]),
            mean(p + "d2", p + "v"),
            helper.make_node("Add", [p + "v", p + "eps"], [p + "ve"]),
            helper.make_node("Sqrt", [p + "ve"], [p + "sd"]),
            helper.make_node("Div", [p + "d", p + "sd"], [p + "n"]),
            helper.make_node("Reshape", [scale, p + "shape"], [p + "s"]),
            helper.make_node("Reshape", [bias, p + "shape"], [p + "b"]),
            helper.make_node("Mul", [p + "n", p + "s"], [p + "ns"]),
            helper.make_node("Add", [p + "ns", p + "b"], [n.output[0]]),
        ]
    del g.node[:]
    g.node.extend(nodes)
    return rewritten


def fail(message):
    print(f"compare-onnxruntime: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    if sys.argv[1:] == ["--setup"]:
        # scripts/fetch-onnxruntime.sh: create the venv (a no-op when it
        # has the packages) and stop.
        ensure_venv()
        print(f"onnxruntime venv ready: {VENV}")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the .onnx model tofu planned")
    ap.add_argument("outputs", help="the file of `tofu run --save-outputs`")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--input-value",
        action="append",
        default=[],
        metavar="NAME=V[,V...]",
        help="a graph input tofu fixed at import (`tofu plan --input-value`, e.g. sr=16000): fed with these values",
    )
    args = ap.parse_args()
    ensure_venv()

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import external_data_helper, helper, numpy_helper
    from safetensors.numpy import load_file

    tofu = load_file(args.outputs)
    with open(args.outputs, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    forward = header.get("__metadata__", {}).get("tofu.forward", "")
    model = onnx.load(args.model, load_external_data=False)
    g = model.graph
    # tofu's synthetic weights replace initializers of the same name.
    substituted = []
    for i, init in enumerate(g.initializer):
        if init.name in tofu:
            dtype = helper.tensor_dtype_to_np_dtype(init.data_type)
            value = tofu[init.name].astype(dtype)
            if list(value.shape) != list(init.dims):
                fail(f"{args.outputs}: `{init.name}` has shape {list(value.shape)}, the model's is {list(init.dims)}")
            g.initializer[i].CopyFrom(numpy_helper.from_array(value, init.name))
            substituted.append(init.name)
    # A synthetic value tofu ran on that is no initializer (a weight in a
    # `Constant` node or an `If` branch, as Paddle's and spox's exporters
    # write them; a view the import folded) cannot be given to onnxruntime:
    # the two would run on different weights.
    outputs = {o.name for o in g.output}
    inputs = {i.name for i in g.input}
    constants = {}

    def collect(graph):
        for n in graph.node:
            if n.op_type == "Constant" and n.output and any(a.name == "value" for a in n.attribute):
                constants[n.output[0]] = numpy_helper.to_array(next(a.t for a in n.attribute if a.name == "value"))
            for a in n.attribute:
                for sub in [a.g] if a.HasField("g") else list(a.graphs):
                    collect(sub)

    collect(g)

    def same_as_constant(name):
        c = constants.get(name)
        return c is not None and c.size == tofu[name].size and np.allclose(
            tofu[name].astype(np.float64).ravel(), c.astype(np.float64).ravel(), rtol=1e-6, atol=0)

    stray = sorted(
        n for n in tofu
        if n not in outputs and n not in inputs and n not in substituted and not same_as_constant(n)
    )
    try:
        external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(args.model)))
    except (OSError, ValueError) as e:
        fail(
            f"{args.model}: external weight data cannot be read ({e}); "
            "run tofu without --weights so it writes its synthetic weights, or put the data file beside the model"
        )
    rewritten = []
    if forward.startswith("training-step"):
        rewritten = batchnorm_on_batch_statistics(model)
    inits = {t.name for t in g.initializer}
    fixed = {}
    for item in args.input_value:
        name, _, vals = item.partition("=")
        try:
            fixed[name] = [float(v) for v in vals.split(",")]
        except ValueError:
            fail(f"--input-value {item}: expected NAME=V[,V...] with numbers")
    feeds = {}
    for inp in g.input:
        if inp.name in inits:
            continue
        if inp.name in fixed:
            dtype = helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
            dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            value = np.array(fixed[inp.name], dtype=dtype)
            feeds[inp.name] = value.reshape(dims) if dims and int(np.prod(dims)) == value.size else value.reshape(()) if value.size == 1 and not dims else value
            continue
        if inp.name not in tofu:
            fail(f"{args.outputs}: no tensor `{inp.name}` (a graph input): run tofu without --inputs, or with an --inputs file that has it")
        dtype = helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        feeds[inp.name] = tofu[inp.name].astype(dtype)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    got = sess.run(names, feeds)
    # Values tofu ran on that are neither initializers nor inputs: fine when
    # onnxruntime computes the same (a ConstantOfShape splat, a folded
    # Reshape of a Constant), else the two ran on different weights.
    # Batch statistics over one value per channel (batch 1, 1×1 features)
    # normalize everything to 0: the output is the bias whatever the input,
    # and the comparison cannot see what feeds such a node.
    produced = {o for n in g.node for o in n.output}
    probed = list(dict.fromkeys([*rewritten, *(n for n in stray if n in produced)]))
    values = {}
    if probed:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        known = {o.name for o in probe.graph.output}
        probe.graph.output.extend(helper.make_empty_tensor_value_info(x) for x in probed if x not in known)
        psess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        values = dict(zip(probed, psess.run(probed, feeds)))
    stray = [
        n for n in stray
        if n not in values or values[n].size != tofu[n].size
        or not np.allclose(tofu[n].astype(np.float64).ravel(), values[n].astype(np.float64).ravel(), rtol=1e-6, atol=0)
    ]
    if stray:
        fail(
            f"{args.outputs}: tofu ran on synthetic values that are not initializers of {args.model} "
            f"({', '.join(stray[:5])}{', ...' if len(stray) > 5 else ''}); run tofu with "
            "`--weights MODEL.onnx`, which gives it every value the model holds"
        )
    degenerate = [x for x in rewritten if values[x].ndim >= 2 and values[x].size == values[x].shape[1]]
    if degenerate:
        print(f"compare-onnxruntime: warning: {len(degenerate)} BatchNormalization on batch statistics over one value "
              f"per channel (input {degenerate[0]}, ...): their outputs are their biases whatever their inputs", file=sys.stderr)
    rows = []
    worst = 0.0
    for name, ref in zip(names, got):
        if name not in tofu:
            rows.append({"output": name, "error": None, "note": "not in tofu's file (a constant folded at import)"})
            continue
        a = tofu[name].astype(np.float64)
        b = np.asarray(ref).astype(np.float64)
        if a.shape != b.shape:
            rows.append({"output": name, "error": float("inf"), "note": f"shape {a.shape} vs {b.shape}"})
            worst = float("inf")
            continue
        nb = np.linalg.norm(b.ravel())
        nd = np.linalg.norm((a - b).ravel())
        err = float(nd / max(nb, 1e-3 * np.sqrt(max(b.size, 1))))
        if not np.isfinite(nd):
            err = float("inf")
        elem = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-6))) if b.size else 0.0
        rows.append({"output": name, "shape": list(b.shape), "error": err, "elementwise": elem})
        worst = max(worst, err)
    ok = worst <= args.tolerance
    if args.json:
        print(json.dumps({"model": args.model, "outputs": rows, "max_rel_error": worst,
                          "substituted_weights": len(substituted),
                          "batchnorm_on_batch_statistics": len(rewritten),
                          "batchnorm_one_value_per_channel": len(degenerate), "ok": ok}))
    else:
        for r in rows:
            if r["error"] is None:
                print(f"{r['output']:<32} -            {r['note']}")
            else:
                print(f"{r['output']:<32} {r['error']:.3e}  (element-wise max {r.get('elementwise', float('nan')):.3e}) {r.get('note', '')}")
        print(f"max relative error {worst:.3e} ({'ok' if ok else 'ABOVE ' + str(args.tolerance)}); "
              f"{len(substituted)} initializers from tofu's file; "
              f"{len(rewritten)} BatchNormalization on batch statistics (tofu's forward: {forward or 'unknown'})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
