#!/usr/bin/env python3
"""Nsight Compute's per-instruction warp samples of an engine kernel, by CUDA source line.

THRIVE compiles its kernels with NVRTC at run time, so Nsight Compute has no source file to show.
This script compiles the same source here the way THRIVE does (libnvrtc, the options of
src/backend/cuda_backend.cpp: --gpu-architecture=sm_90 -std=c++17 -lineinfo), disassembles it with
line information (nvdisasm -g), checks that every profiled instruction is the same instruction at
the same offset (same CUDA version: the same SASS), and sums the samples, stall reasons and
executed instructions of each source line (inlined helpers count at their own line).

Usage: ncu_source_lines.py SASS.csv[.gz] --source FILE.cu --kernel NAME [--top N]
                           [--phases "name:first-last,name:first-last,..."] [--arch sm_90]
  SASS.csv: `ncu --import R.ncu-rep --page source --csv --print-source sass` of one kernel (rows:
  Address, Source, Warp Stall Sampling (All Samples), ..., stall_* columns), e.g. run 2 of
  bench/results/h200-persistent-decode-2026-12-01/session10/.
  --phases: sum line ranges of the source (for example the stages of a kernel; ranges must not
  overlap); a line outside every range, or in another file (thrive_cuda.cuh), counts as "other".
Needs libnvrtc (CUDA_HOME/lib64, default /usr/local/cuda) and nvdisasm on PATH (the CUDA toolkit;
without it: pip install nvidia-cuda-nvdisasm). Exits non-zero when the SASS differs."""
import argparse
import collections
import csv
import ctypes
import gzip
import os
import re
import subprocess
import sys
import tempfile


def nvrtc_cubin(source_path, arch):
    lib_path = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libnvrtc.so")
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        sys.exit(f"cannot load NVRTC ({e}): set CUDA_HOME to the CUDA toolkit")
    src = open(source_path, "rb").read()
    here = os.path.dirname(os.path.abspath(source_path))
    # next to the source first, then the repository layout (kernels/cuda/thrive_cuda.cuh)
    candidates = [os.path.join(here, "thrive_cuda.cuh"), os.path.join(here, "..", "thrive_cuda.cuh")]
    header_path = next((c for c in candidates if os.path.isfile(c)), None)
    if header_path is None:
        sys.exit(f"thrive_cuda.cuh not found: expected it at {' or '.join(candidates)}")
    header = open(header_path, "rb").read()
    prog = ctypes.c_void_p()
    names = (ctypes.c_char_p * 1)(b"thrive_cuda.cuh")
    texts = (ctypes.c_char_p * 1)(header)
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"candidate.cu", 1, texts, names) != 0:
        sys.exit("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-lineinfo"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    if rc != 0:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        sys.exit(f"NVRTC could not compile {source_path}:\n{log.value.decode(errors='replace')[-3000:]}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    return cubin.raw


def opcode(text):
    words = text.strip().rstrip(";").split()
    return words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")


def local_sass(cubin, kernel):
    """{offset: (source line, opcode)} of one kernel's SASS; the line is an int in the compiled
    source (NVRTC's "candidate.cu"), a "file:line" string in another file (the header), or None."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run(["nvdisasm", "-g", f.name], capture_output=True, text=True, check=True).stdout
        except FileNotFoundError:
            sys.exit("nvdisasm not found on PATH (the CUDA toolkit's; or pip install nvidia-cuda-nvdisasm)")
        except subprocess.CalledProcessError as e:
            sys.exit(f"nvdisasm failed: {e.stderr.strip()[-500:]}")
    fn, line, sass = None, None, {}
    for text in out.split("\n"):
        m = re.search(r"\.text\.(\w+):", text)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r'## File "(.*?)", line (\d+)', text)
        if m:
            name = os.path.basename(m.group(1))
            line = int(m.group(2)) if name == "candidate.cu" else f"{name}:{m.group(2)}"
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", text)
        if fn == kernel and m:
            sass[int(m.group(1), 16)] = (line, opcode(m.group(2)))
    if not sass:
        sys.exit(f"kernel {kernel} not found in the NVRTC output")
    return sass


def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--source", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--phases", default="")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    phases = []
    for item in filter(None, args.phases.split(",")):
        m = re.fullmatch(r"([^:]+):(\d+)-(\d+)", item.strip())
        if not m or int(m.group(2)) > int(m.group(3)):
            ap.error(f"--phases item {item!r}: expected name:first-last with first <= last")
        name, first, last = m.group(1), int(m.group(2)), int(m.group(3))
        for other, a, b in phases:
            if first <= b and a <= last:
                ap.error(f"--phases: {name} ({first}-{last}) overlaps {other} ({a}-{b})")
        phases.append((name, first, last))
    for path in (args.csv, args.source):
        if not os.path.isfile(path):
            ap.error(f"{path}: no such file")
    opener = gzip.open if args.csv.endswith(".gz") else open
    try:
        rows = list(csv.reader(opener(args.csv, "rt", errors="replace")))
    except (OSError, EOFError, csv.Error) as e:
        sys.exit(f"{args.csv}: cannot read it as {'gzip-compressed ' if opener is gzip.open else ''}CSV ({e})")
    head = next((i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"]), None)
    if head is None:
        sys.exit(f"{args.csv}: no 'Address,Source' header row (expected ncu --page source --csv --print-source sass)")
    named = [r[1] for r in rows[:head] if len(r) > 1 and r[0] == "Kernel Name"]
    if named and named[-1] != args.kernel:
        sys.exit(f"{args.csv} profiles kernel {named[-1]}, not --kernel {args.kernel}")
    cols, body = rows[head], []
    for r in rows[head + 1:]:
        if r[:1] == ["Kernel Name"] or r[:2] == ["Address", "Source"]:
            break  # the next kernel's page: one kernel at a time
        if len(r) == len(cols):
            body.append(r)
    ix = {c: i for i, c in enumerate(cols)}
    if "Warp Stall Sampling (All Samples)" not in ix or not body:
        sys.exit(f"{args.csv}: no 'Warp Stall Sampling (All Samples)' column or no instruction rows")
    samples_col, inst_col = ix["Warp Stall Sampling (All Samples)"], ix.get("Instructions Executed")
    reasons = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
    try:
        addresses = [int(r[0], 16) for r in body]
    except ValueError as e:
        sys.exit(f"{args.csv}: an Address that is not hexadecimal ({e})")
    sass = local_sass(nvrtc_cubin(args.source, args.arch), args.kernel)
    base = addresses[0]
    mismatch = [r for a, r in zip(addresses, body) if sass.get(a - base, (None, None))[1] != opcode(r[1])]
    print(f"{len(body)} profiled instructions, {len(sass)} compiled here, {len(mismatch)} differ")
    if mismatch:
        sys.exit("the profiled SASS is not this source's (another source revision or CUDA version)")
    by_line, by_phase = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    for a, r in zip(addresses, body):
        line = sass[a - base][0]
        phase = next((n for n, lo, hi in phases if isinstance(line, int) and lo <= line <= hi), "other")
        for acc in (by_line[line], by_phase[phase]):
            acc["samples"] += num(r[samples_col])
            acc["inst"] += num(r[inst_col]) if inst_col is not None else 0
            for c in reasons:
                acc[c] += num(r[ix[c]])
    total = sum(c["samples"] for c in by_line.values()) or 1
    src = open(args.source, errors="replace").read().split("\n")

    def describe(c):
        top = sorted(((c[k], k[6:]) for k in reasons), reverse=True)[:3]
        return " ".join(f"{n} {v:.0f}" for v, n in top if v > 0)

    if phases:
        print("\nphase (source lines)                 samples   share  warp instructions  top stall reasons")
        for name, c in sorted(by_phase.items(), key=lambda kv: -kv[1]["samples"]):
            print(f"{name:36s} {c['samples']:8.0f} {100 * c['samples'] / total:6.1f}% {c['inst']:18.0f}  {describe(c)}")
    print(f"\nline  samples   share  warp instructions  top stall reasons | source")
    for line, c in sorted(by_line.items(), key=lambda kv: -kv[1]["samples"])[:args.top]:
        if isinstance(line, int):
            label, text = str(line), src[line - 1].strip()[:80] if 0 < line <= len(src) else ""
        else:
            label, text = "-", line or "(no line information)"
        print(f"{label:>5s} {c['samples']:7.0f} {100 * c['samples'] / total:6.1f}% {c['inst']:18.0f}  {describe(c)} | {text}")


if __name__ == "__main__":
    main()
