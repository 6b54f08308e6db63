#!/usr/bin/env python3
"""Make PyPI's Linux torch wheel, installed with `pip install --no-deps`,
import and run on the CPU without its multi-GB CUDA dependencies.

The wheel's libraries (libtorch_cpu.so included) name CUDA libraries
(libcudart, libcublas, libcudnn, libnccl, ...) as DT_NEEDED, so the dynamic
loader refuses to load torch without them. This writes, next to torch's own
libraries (torch/lib, found through their $ORIGIN rpath), one stub library
per missing soname that defines every symbol torch imports from it (with
the symbol versions torch asks for); each stub function returns 100
(cudaErrorNoDevice), so `torch.cuda.is_available()` is False. CPU kernels
never call them. For scripts/bench-cpu.sh; run with the venv's python:

    python torch_cpu_stubs.py SITE_PACKAGES/torch
"""
import glob
import os
import re
import subprocess
import sys
import tempfile


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", path))


def symbols(path, defined):
    """Dynamic symbols `path` defines, or those it needs (strong undefined, type U)."""
    out = run("nm", "-D", "--defined-only" if defined else "--undefined-only", path)
    rows = [line.split() for line in out.splitlines()]
    return [r[-1] for r in rows if r and (defined or r[-2] == "U")]


def main():
    torch = sys.argv[1]
    libdir = os.path.join(torch, "lib")
    libs = sorted(glob.glob(os.path.join(libdir, "*.so*")) + glob.glob(os.path.join(torch, "_C*.so")))
    system = {}
    for line in run("ldconfig", "-p").splitlines()[1:]:
        m = re.match(r"\s*(\S+) \((.*?)\) => (\S+)", line)
        if m and "x86-64" in m.group(2):
            system.setdefault(m.group(1), m.group(3))
    present = {os.path.basename(p) for p in libs}
    missing, found = set(), set(libs)
    for lib in libs:
        for so in needed(lib):
            if so in present:
                continue
            if so in system:
                found.add(system[so])
            else:
                missing.add(so)
    if not missing:
        print("torch_cpu_stubs: nothing missing")
        return
    defined = set()
    for lib in found:
        defined.update(s.split("@")[0] for s in symbols(lib, True))
    versioned, plain = {}, set()
    for lib in libs:
        for s in symbols(lib, False):
            name, _, version = s.partition("@")
            version = version.lstrip("@")
            if version in missing or version == "NVSHMEM":
                versioned.setdefault(version, set()).add(name)
            elif not version and name not in defined:
                plain.add(name)
    # Versioned symbols go to the library of that name (NVSHMEM: libnvshmem_host);
    # unversioned ones to every other stub (any library in scope may define them).
    owner = {v: ("libnvshmem_host.so.3" if v == "NVSHMEM" else v) for v in versioned}
    with tempfile.TemporaryDirectory() as tmp:
        for so in sorted(missing):
            vers = [v for v in versioned if owner[v] == so]
            names = set().union(*(versioned[v] for v in vers)) if vers else set()
            names |= plain
            src = os.path.join(tmp, "stub.c")
            with open(src, "w") as f:
                for n in sorted(names):
                    f.write(f"int {n}(void) {{ return 100; }}\n")
            cmd = ["cc", "-shared", "-fPIC", "-O0", "-w", "-o", os.path.join(libdir, so), src, f"-Wl,-soname,{so}"]
            if vers:
                script = os.path.join(tmp, "ver.map")
                with open(script, "w") as f:
                    for v in vers:
                        f.write(f"{v} {{ global: {'; '.join(sorted(versioned[v]))}; }};\n")
                cmd.append(f"-Wl,--version-script={script}")
            subprocess.run(cmd, check=True)
    print(f"torch_cpu_stubs: {len(missing)} stub libraries ({', '.join(sorted(missing))}), "
          f"{len(plain)} unversioned symbols")


if __name__ == "__main__":
    main()
