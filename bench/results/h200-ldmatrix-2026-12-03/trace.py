#!/usr/bin/env python3
"""Timing experiment (run 3): a %globaltimer trace of one layer's attention stage in the persistent
decode kernel (layer 14, tensor-core parts), kept in device memory and printed by thread 0 of each
block only after its last layer, so the printf calls do not delay the traced layer (the trace of
2026-12-02 printed inside it and delayed block 0 by 34-43 µs). Per block: the end of its qkv GEMV
and the moment its o stage has the whole attention output (TRB lines). Per part (TRP lines): entry;
warp 0's qkv rows loaded, its query ready (q/k norm, RoPE), its tiles done; the part barrier; the
partial results stored; the merge's inputs loaded; the merge done; and for the warp that holds the
new position (which makes the new key and value): rows loaded, query ready, tiles done.
Tensor-core parts only (the CUDA-core entries' two 128-thread groups would share a slot).
Usage: trace.py FILE (edits it in place; exits 1 if an anchor is missing). Timing only.
(After call 3: a __syncwarp before the rows stamps, so they time the whole warp's rows, the new key
and value included; the blocks' has-o-rows flag; no reset of the pw columns, whose stale values the
summary drops.)"""
import sys

from srcedit import SourceEdit

if len(sys.argv) != 2:
    sys.exit(__doc__)
src = SourceEdit(sys.argv[1])
sub = src.sub

sub("// Shared memory of one attention group (128 threads", """#define ENGINE_TRACE_LAYER 14
// [block x 2 + group][13]: 0 entry, 1-3 warp 0 (rows, query, tiles), 4 barrier, 5 partials,
// 6 merge inputs, 7 merged, 8-10 the new position's warp (rows, query, tiles), 11 s|g|b, 12 tag.
// Columns 1-10 are not reset at entry: a value older than the entry (an earlier launch's) means
// "not reached" (trace_summary.py drops it). engine_trace_blk: qkv end, o input, has o rows.
__device__ unsigned long long engine_trace_part[512][13];
__device__ unsigned long long engine_trace_blk[256][3];
__shared__ int engine_trace_now;
// engine_globaltimer_ns with a memory clobber: the read stays between the loads and stores around it
__device__ __forceinline__ unsigned long long engine_tr_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ void engine_tr(int col) {
  engine_trace_part[blockIdx.x * 2 + (threadIdx.x >> 8)][col] = engine_tr_now();
}
// Shared memory of one attention group (128 threads""")
# the merge: inputs loaded, slice done
sub("""  sync();
  float* w_sh = &sm.ml[0][0][0];""", """  sync();
  if (engine_trace_now && tid == 0) engine_tr(6);
  float* w_sh = &sm.ml[0][0][0];""")
sub("""  }
  return true;
}
// One (split s of S, KV head g, sequence b) part of decode attention by 128 threads""", """  }
  if (engine_trace_now && tid == 0) engine_tr(7);
  return true;
}
// One (split s of S, KV head g, sequence b) part of decode attention by 128 threads""")
# the tensor-core part
sub("""  const int tiles = hi > lo ? (hi - lo + 7) >> 3 : 0;
  const float qs""", """  const int tiles = hi > lo ? (hi - lo + 7) >> 3 : 0;
  if (engine_trace_now && tid == 0) {
    unsigned long long* q = engine_trace_part[blockIdx.x * 2 + (threadIdx.x >> 8)];
    q[0] = engine_tr_now();
    q[11] = ((unsigned long long)s << 16) | ((unsigned long long)g << 8) | (unsigned long long)b;
    q[12] = a.tag;
  }
  const float qs""")
sub("""    engine_ll_finish8n<P>(src, step, pieces, a.tag, w, raw);
""", """    engine_ll_finish8n<P>(src, step, pieces, a.tag, w, raw);
    __syncwarp();  // (trace) every lane of the warp has its rows, the new key's and value's too
    if (engine_trace_now && pass == 0 && tid == 0) engine_tr(1);
    if (engine_trace_now && pass == passes - 1 && pw && lane == 0) engine_tr(8);
""")
sub("""    engine_tc_pack<D>(x, raw);
""", """    engine_tc_pack<D>(x, raw);
    if (engine_trace_now && pass == 0 && tid == 0) engine_tr(2);
    if (engine_trace_now && pass == passes - 1 && pw && lane == 0) engine_tr(9);
""")
sub("""  // The warp's (max, sum) of head r and accumulators""", """  if (engine_trace_now && tid == 0) engine_tr(3);
  if (engine_trace_now && pw && lane == 0) engine_tr(10);
  // The warp's (max, sum) of head r and accumulators""")
sub("""  sync();
  // The part's result: per element""", """  sync();
  if (engine_trace_now && tid == 0) engine_tr(4);
  // The part's result: per element""")
sub("""  engine_attention_merge_slice<G, kThreads>(a, s, bg, S, tid, sm, sync);
}""", """  if (engine_trace_now && tid == 0) engine_tr(5);
  engine_attention_merge_slice<G, kThreads>(a, s, bg, S, tid, sm, sync);
}""")
# the layer loop
sub("""    unsigned* c = counters + kDlStages * l;
""", """    unsigned* c = counters + kDlStages * l;
    if (threadIdx.x == 0) engine_trace_now = l == ENGINE_TRACE_LAYER;
""")
sub("""    if (stamp) stamps[kDlStages * l + kDlAttn] = engine_globaltimer_ns();
""", """    if (stamp) stamps[kDlStages * l + kDlAttn] = engine_globaltimer_ns();
    if (engine_trace_now && threadIdx.x == 0) engine_trace_blk[blockIdx.x][0] = engine_tr_now();
""")
sub("""    if (stamp) stamps[kDlStages * l + kDlO] = engine_globaltimer_ns();
""", """    if (stamp) stamps[kDlStages * l + kDlO] = engine_globaltimer_ns();
    if (engine_trace_now && threadIdx.x == 0) {
      long long to0, to1;
      engine_dl_groups(H, to0, to1);
      engine_trace_blk[blockIdx.x][1] = engine_tr_now();
      engine_trace_blk[blockIdx.x][2] = to0 < to1;  // blocks without o rows skip the o input's wait
    }
""")
sub("""#else
  __trap();  // needs sm_90 (griddepcontrol""", """  if (threadIdx.x == 0 && d.layers > ENGINE_TRACE_LAYER) {
    const unsigned tt = engine_dl_tag(epoch, d.layers, ENGINE_TRACE_LAYER);
    printf("TRB %u %d %llu %llu %llu\\n", tt, (int)blockIdx.x, engine_trace_blk[blockIdx.x][0], engine_trace_blk[blockIdx.x][1],
           engine_trace_blk[blockIdx.x][2]);
    for (int hh = 0; hh < 2; ++hh) {
      const unsigned long long* q = engine_trace_part[blockIdx.x * 2 + hh];
      if (q[12] == tt)
        printf("TRP %u %d %d %llx %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\\n", tt, (int)blockIdx.x, hh, q[11],
               q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10]);
    }
  }
#else
  __trap();  // needs sm_90 (griddepcontrol""")
src.save()
