#!/usr/bin/env python3
"""Timing-only edit of kernels/cuda/engine/qwen3_engine.cu (run 4): in layer 14 of the
stage-timed (eager) steps, thread 0 of every block records %globaltimer at each GEMV tile when its
warp's slice has landed (after cp.async.wait_group and __syncwarp) and again after its tile issue
(the ring's cp.async of the tile NS - 1 ahead), into a global buffer; after the layer loop each
block prints its tiles (TT lines). How long the issue blocks, and how far apart tiles land."""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_edit import Edit  # noqa: E402
e = Edit(sys.argv[1])
once = e.once
once("struct EngineDlStream {\n", "__device__ unsigned long long engine_tt_buf[256][64][2];\nstruct EngineDlStream {\n  int trace = 0, tn = 0;\n")
once("      engine_dl_wait_stage(st.stages);\n      __syncwarp();\n      st.issue();\n",
     "      engine_dl_wait_stage(st.stages);\n      __syncwarp();\n"
     "      const unsigned long long tta = st.trace && threadIdx.x == 0 ? engine_globaltimer_ns() : 0ull;\n"
     "      st.issue();\n"
     "      if (st.trace && threadIdx.x == 0 && st.tn < 64) {\n"
     "        engine_tt_buf[blockIdx.x][st.tn][0] = tta, engine_tt_buf[blockIdx.x][st.tn][1] = engine_globaltimer_ns();\n"
     "        ++st.tn;\n      }\n")
once("  for (long long l = 0; l < d.layers; ++l) {\n    const bf16_t* const* W",
     "  for (long long l = 0; l < d.layers; ++l) {\n    st.trace = stamps != nullptr && l == 14;\n    const bf16_t* const* W")
once("  // The last block out zeroes the stage counters for the next launch",
     "  if (stamps != nullptr && threadIdx.x == 0)\n"
     "    for (int n = 0; n < st.tn; ++n)\n"
     "      printf(\"TT %d %d %llu %llu\\n\", (int)blockIdx.x, n, engine_tt_buf[blockIdx.x][n][0], engine_tt_buf[blockIdx.x][n][1]);\n"
     "  // The last block out zeroes the stage counters for the next launch")
e.save()
