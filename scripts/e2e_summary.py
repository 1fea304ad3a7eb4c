#!/usr/bin/env python3
"""One `thrive e2e --json` result in two lines: decode ms/step and tokens/s (graph replay), the
eager (stage-timed) step, the persistent kernel and its ring depth, prefill tokens/s; then the
eager decode stages in µs per call (with --layer, only the five layer stages, lm_head and sampling).
Usage: e2e_summary.py FILE.json [LABEL] [--layer]. Used by scripts/device-*.sh."""
import json
import sys

LAYER = ("qkv_gemm", "attention", "o_gemm", "mlp_gate_up_gemm", "mlp_down_gemm", "lm_head", "sampling")


def main(argv):
    args = [a for a in argv if a != "--layer"]
    if not args:
        sys.exit(__doc__)
    label = args[1] if len(args) > 1 else args[0]
    try:
        d = json.load(open(args[0]))
    except (OSError, ValueError) as e:
        print(f"{label}: no result ({e})")
        return
    print(f"{label}: decode {d['decode_ms_per_step']:.3f} ms/step ({d['decode_tokens_per_s']:.0f} tok/s), eager "
          f"{d['decode_eager_ms_per_step']:.3f}; persistent {d.get('persistent_decode')} "
          f"(blocks {d.get('persistent_blocks')}, NS {d.get('persistent_stages')}, splits {d.get('persistent_splits')}, attention {d.get('persistent_attention')}, "
          f"softmax {d.get('persistent_softmax', 'merge')}); "
          f"prefill {d['prefill_tokens_per_s']:.0f} tok/s")
    stages = [r for r in d["decode_stages"] if r["calls"] and ("--layer" not in argv or r["stage"] in LAYER)]
    print("  eager decode stages, µs per call: " +
          ", ".join(f"{r['stage']} {1000 * r['ms'] / r['calls']:.1f}" for r in stages))


if __name__ == "__main__":
    main(sys.argv[1:])
