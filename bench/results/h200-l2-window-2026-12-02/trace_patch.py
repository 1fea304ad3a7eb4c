#!/usr/bin/env python3
"""Timing-only edit of kernels/cuda/engine/qwen3_engine.cu (run 2's trace; reverted by trace.sh):
thread 0 of every block records %globaltimer at 12 points of layer 14 in the stage-timed (eager)
steps and prints them once, after its layer loop (no printf inside the timed layers):
  0 qkv start (after the down wait)   1 qkv input normed      2 qkv GEMV done
  3 attention parts done              4 o input landed        5 o GEMV done
  6 gate/up wait done                 7 gate/up input normed  8 gate/up GEMV done
  9 down wait done                   10 SwiGLU input ready   11 down GEMV done"""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_edit import Edit  # noqa: E402
e = Edit(sys.argv[1])
once = e.once
M = lambda k: f"if (trl) tr[{k}] = engine_globaltimer_ns();"
once("  for (long long l = 0; l < d.layers; ++l) {\n    const bf16_t* const* W",
     "  unsigned long long tr[12] = {0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull};\n"
     "  for (long long l = 0; l < d.layers; ++l) {\n    const bool trl = stamps != nullptr && l == 14 && threadIdx.x == 0;\n"
     "    const bf16_t* const* W")
# point k's stamp goes after the line(s) that end where point k is (the o stamp: before block 0's)
after = [
    "    if (l > 0) engine_dl_wait(c - kDlStages + kDlDown, gridDim.x);\n",
    "    engine_gemv_norm_input<true>(h, W[kDlInNorm], T, H, eps, xs);\n    __syncthreads();\n",
    "    __syncthreads();  // xs, which the attention groups' shared memory overlaps, is read\n",
    "    __syncthreads();  // the attention groups' shared memory (over xs) is free\n",
    "    __syncthreads();\n",  # completed below: the one before block 0's o stamp
    "    engine_dl_gemv<true>(T, H, NQ * D, xs, h, ring, red, stage, st);\n",
    "    engine_dl_wait(c + kDlO, gridDim.x);\n",
    "    engine_gemv_norm_input<true>(h, W[kDlPostNorm], T, H, eps, xs);\n    __syncthreads();\n",
    "    engine_dl_gemv<false>(T, 2 * I, H, xs, gu, ring, red, stage, st);\n",
    "    engine_dl_wait(c + kDlGateUp, gridDim.x);\n",
    "    engine_gemv_swiglu_input<true>(gu, T, I, xs);\n    __syncthreads();\n",
    "    engine_dl_gemv<true>(T, H, I, xs, h, ring, red, stage, st);\n",
]
o_stamp = "    if (stamp) stamps[kDlStages * l + kDlO] = engine_globaltimer_ns();\n"
for k, line in enumerate(after):
    tail = o_stamp if k == 4 else ""
    once(line + tail, line + "    " + M(k) + "\n" + tail)
once("  // The last block out zeroes the stage counters for the next launch",
     "  if (stamps != nullptr && threadIdx.x == 0)\n"
     "    printf(\"TR %d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\\n\", (int)blockIdx.x, tr[0], tr[1], tr[2],\n"
     "           tr[3], tr[4], tr[5], tr[6], tr[7], tr[8], tr[9], tr[10], tr[11]);\n"
     "  // The last block out zeroes the stage counters for the next launch")
e.save()
