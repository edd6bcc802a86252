#!/usr/bin/env python3
"""Where a custom all-reduce call's time goes inside TP decode steps, from the GS_AR_TRACE files
of two ranks (distributed/cuda/custom_all_reduce.h: one line a call, "call kind rows t0..t4", the
%globaltimer in ns at block 0's entry, after pdl_wait, on reaching the barrier, on passing it, at
its end; kind 0 the plain one-shot, 1 the fused add + norm with the barrier, 2 the flagless (Lamport) one).

Usage: tp_trace.py PREFIX [ROWS]   (reads PREFIX.rank0 and PREFIX.rank1; ROWS: the fused calls'
row count to keep, default 1 = bs-1 decode)
"""
import statistics as st
import sys


def load(path):
    recs = {}
    with open(path) as f:
        for line in f:
            c, kind, rows, *t = map(int, line.split())
            recs[c] = (kind, rows, t)
    return recs


def med(xs):
    return st.median(xs) if xs else float("nan")


def main():
    prefix, rows = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    r0, r1 = load(prefix + ".rank0"), load(prefix + ".rank1")
    calls = sorted(set(r0) & set(r1))
    # The clocks of the two GPUs: both ranks leave the barrier within one NVLink crossing of the
    # later arrival, so the median difference of the pass times is the offset (+- ~1 us).
    off = med([r1[c][2][3] - r0[c][2][3] for c in calls])
    # Decode steps: a plain one-shot call (the embedding's f32 all-reduce) then fused calls of `rows` rows.
    steps, cur = [], None
    for c in calls:
        kind, n, _ = r0[c]
        if kind == 0:
            cur = [c]
            steps.append(cur)
        elif cur is not None and n == rows:
            cur.append(c)
        else:
            cur = None
    per = max((len(s) for s in steps), default=0)
    steps = [s for s in steps if len(s) == per and per > 1]
    if not steps:
        print("no decode steps with", rows, "rows in the trace")
        return
    print(f"{len(steps)} steps of {per} calls (1 plain + {per - 1} fused, rows {rows}); clock offset rank1-rank0 "
          f"{off / 1e3:.1f} us")

    def stats(cs, label):
        # t: 0 entry, 1 ready (after pdl_wait), 2 arrive (data pushed), 3 pass (barrier), 4 end
        f = {k: [] for k in ("early0", "early1", "push0", "push1", "wait0", "wait1", "post0", "post1", "skew",
                             "ready_skew", "busy0", "busy1")}
        for c in cs:
            a, b = r0[c][2], [t - off for t in r1[c][2]]
            f["early0"].append(a[1] - a[0]), f["early1"].append(b[1] - b[0])
            f["push0"].append(a[2] - a[1]), f["push1"].append(b[2] - b[1])
            f["wait0"].append(a[3] - a[2]), f["wait1"].append(b[3] - b[2])
            f["post0"].append(a[4] - a[3]), f["post1"].append(b[4] - b[3])
            f["busy0"].append(a[4] - a[1]), f["busy1"].append(b[4] - b[1])
            f["skew"].append(b[2] - a[2])  # > 0: rank 1 reached the barrier later
            f["ready_skew"].append(b[1] - a[1])
        us = {k: (med(v) / 1e3, st.mean(v) / 1e3) for k, v in f.items()}
        print(f"{label:<22} " + "  ".join(f"{k} {m:.2f}/{a:.2f}" for k, (m, a) in us.items()))

    print("per call, us as median/mean; early: entry to pdl_wait done (PDL launch ahead of the previous kernel's "
          "end), push: to the barrier, wait: in the barrier, post: barrier to end, busy: ready to end, skew: rank 1's "
          "arrival - rank 0's")
    stats([s[0] for s in steps], "embedding (plain)")
    stats([s[1] for s in steps], "first fused")
    stats([c for s in steps for c in s[1:]], "all fused")
    stats([c for s in steps for c in s[1::2]], "fused after o_proj")
    stats([c for s in steps for c in s[2::2]], "fused after down")
    # Between calls (rank 0's clock): from one call's end to the next one's ready = the kernels between.
    gaps_o = [r0[s[i + 1]][2][1] - r0[s[i]][2][4] for s in steps for i in range(0, per - 1, 2)]
    gaps_d = [r0[s[i + 1]][2][1] - r0[s[i]][2][4] for s in steps for i in range(1, per - 1, 2)]
    print(f"rank 0 between calls: to the fused after o_proj (norm->qkv->attn->o_proj) {med(gaps_o) / 1e3:.2f} us, "
          f"to the fused after down (gate_up->down) {med(gaps_d) / 1e3:.2f} us")
    span0 = [r0[s[-1]][2][4] - r0[s[0]][2][0] for s in steps]
    ar0 = [sum(r0[c][2][4] - r0[c][2][1] for c in s) for s in steps]
    ar1 = [sum(r1[c][2][4] - r1[c][2][1] for c in s) for s in steps]
    wait0 = [sum(r0[c][2][3] - r0[c][2][2] for c in s) for s in steps]
    wait1 = [sum(r1[c][2][3] - r1[c][2][2] for c in s) for s in steps]
    host = [r0[b[0]][2][0] - r0[a[-1]][2][4] for a, b in zip(steps, steps[1:])]
    print(f"per step, ms (median): rank 0 first call to last end {med(span0) / 1e6:.3f}; calls ready->end rank 0 "
          f"{med(ar0) / 1e6:.3f}, rank 1 {med(ar1) / 1e6:.3f}; of which in the barrier rank 0 {med(wait0) / 1e6:.3f}, "
          f"rank 1 {med(wait1) / 1e6:.3f}; last call end to the next step's first entry {med(host) / 1e6:.3f}")


if __name__ == "__main__":
    main()
