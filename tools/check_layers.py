#!/usr/bin/env python3
"""The library's parts depend one way, and so do the op families (README.md, "Where things are").

Checks every #include "..." of the tracked sources:
  1. a part includes only its own headers and those of parts below it:
       graph < io < ops < autodiff < models, optim < distributed, text < pipelines, train
  2. ops/kernels/ knows no graph: it includes only kernels/ and the graph-free ops/threads.h and
     ops/cpu_capability.h;
  3. an op family's header includes only lower families' headers:
       elementwise < reduce < shape_ops < nn < matmul < attention
  4. nothing outside examples/ includes a file of examples/;
  5. GPU code stays in its place: only .cu files and a part's cuda/*_cuda.cc files include CUDA's
     headers (<cuda_runtime.h>, <cublasLt.h>, <cub/...>), and a part's cuda/ .cu files and headers
     include only other cuda/ headers of ours (plain argument structs: no fmt, Abseil or xsimd), or,
     in an emulator build only, tools/cuda_dry/emu/'s stand-ins for CUDA's instructions.
     (tools/cuda_dry/ implements CUDA's own API for the dry run, so it includes CUDA's headers.)
A forwarding header left at a moved header's old place for one release ("this forwarding header
goes in ...") is exempt from 1.

  tools/check_layers.py
"""
import os
import re
import subprocess
import sys

RANK = {"graph": 0, "io": 1, "ops": 2, "autodiff": 3, "models": 4, "optim": 4, "distributed": 5,
        "text": 5, "pipelines": 6, "train": 6}
FAMILIES = ["elementwise", "reduce", "shape_ops", "nn", "matmul", "attention"]
KERNEL_MAY_INCLUDE = {"ops/threads.h", "ops/cpu_capability.h"}  # graph-free
_include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_system_include = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.M)
_cuda_header = re.compile(r'^(cuda|cub/|cublas|cuda_|nv/|thrust/|curand|mma\.h|cooperative_groups)')


def part_of(path):
    if path.startswith("ops/kernels/"):
        return "ops/kernels"
    return path.split("/", 1)[0] if "/" in path else ""


def main():
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h", "*.inc", "*.cu", "*.cuh"],
                           check=True, capture_output=True, text=True).stdout.split()
    problems = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        forwarding = "this forwarding header goes in" in text
        me = part_of(f)
        in_cuda = "/cuda/" in f
        may_see_cuda = (f.endswith((".cu", ".cuh")) or (in_cuda and f.endswith("_cuda.cc")) or
                        f.startswith("tools/cuda_dry/"))
        for name in _system_include.findall(text):
            if _cuda_header.match(name) and not may_see_cuda:
                problems.append(f"{f}: includes <{name}>: only .cu files and a part's cuda/*_cuda.cc files see CUDA's headers")
        if in_cuda and (f.endswith((".cu", ".cuh", ".h"))):
            for name in _include.findall(text):
                target = os.path.normpath(os.path.join(os.path.dirname(f), name))
                if not os.path.isfile(os.path.join(root, target)):
                    target = os.path.normpath(name)
                if "/cuda/" not in target and not target.startswith("tools/cuda_dry/emu/"):  # (the emulator's stand-ins)
                    problems.append(f"{f}: includes {name}: GPU kernels and their argument headers include only cuda/ headers")
        for name in _include.findall(text):
            target = os.path.normpath(os.path.join(os.path.dirname(f), name))
            if not os.path.isfile(os.path.join(root, target)):
                target = os.path.normpath(name)
            if not os.path.isfile(os.path.join(root, target)):
                continue  # generated (tg_build_config.h) or a test's own include path
            them = part_of(target)
            if them == "examples" and me != "examples":
                problems.append(f"{f}: includes {target}: nothing outside examples/ may include it")
            if me == "ops/kernels":
                if them != "ops/kernels" and target not in KERNEL_MAY_INCLUDE:
                    problems.append(f"{f}: includes {target}: kernels know no graph (only ops/kernels/ and "
                                    f"{', '.join(sorted(KERNEL_MAY_INCLUDE))})")
                continue
            mine, theirs = RANK.get(me), 1.5 if them == "ops/kernels" else RANK.get(them)  # kernels: under ops/
            if mine is not None and theirs is not None and theirs > mine and not forwarding:
                problems.append(f"{f}: includes {target}: {me}/ sits below {them}/ (order: graph < io < ops < "
                                "autodiff < models, optim < distributed, text < pipelines, train)")
            if mine is not None and theirs is not None and theirs == mine and me != them and not forwarding:
                problems.append(f"{f}: includes {target}: {me}/ and {them}/ are side by side and may not include each other")
            fam = os.path.splitext(os.path.basename(f))[0]
            tfam = os.path.splitext(os.path.basename(target))[0]
            if (f.endswith(".h") and me == "ops" and them == "ops" and fam in FAMILIES and tfam in FAMILIES
                    and FAMILIES.index(tfam) > FAMILIES.index(fam)):
                problems.append(f"{f}: includes {target}: op families go {' < '.join(FAMILIES)}; a header "
                                "includes only lower ones")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layering")
        return 1
    print(f"check_layers: {len(files)} files include only what sits below them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
