#!/usr/bin/env python3
"""Timing variant (run 7): the persistent kernel's dynamic shared memory grows by THRIVE_DL_PAD_KIB
KiB (an environment variable read by the engine; 0 or unset: no change), which the kernel never
touches. With 5 ring stages and 32 KiB of padding a block takes as much shared memory as with 6,
so the driver's shared-memory carveout, and with it the L1 left per SM, is that of 6 stages while
the ring stays at 5. If the 5-stage gain survives the padding, the L1 size is not its cause.
Usage: smem_pad.py FILE (src/model/cuda_engine.cpp; edits in place; exits 1 if the anchor is
missing). Timing only."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h200-ldmatrix-2026-12-03"))
from srcedit import SourceEdit  # noqa: E402

if len(sys.argv) != 2:
    sys.exit(__doc__)
src = SourceEdit(sys.argv[1])
old = "      m.dl_smem = kDlHeadBytes + region + m.dl_stages * kDlTileBytes;\n"
src.sub(old, old + "      if (const char* pad = std::getenv(\"THRIVE_DL_PAD_KIB\")) m.dl_smem += int64_t(std::atoi(pad)) * 1024;\n")
src.save()
