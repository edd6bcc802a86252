"""Per-kernel GPU time from an ncu CSV (ncu --csv --metrics gpu__time_duration.sum --log-file F ...):
total ms, launches and mean us per (kernel, grid), largest total first.

Usage: python3 ncu_summary.py F [top]
"""
import csv, sys
from collections import defaultdict


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = [l for l in open(path) if l.startswith('"')]  # ncu's own ==PROF== lines are not CSV
    tot, cnt = defaultdict(float), defaultdict(int)
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(r["Metric Value"].replace(",", "")) * (1e3 if r.get("Metric Unit") == "usecond" else 1.0)
        key = (r["Kernel Name"][:80], r.get("Grid Size", ""))
        tot[key] += ns
        cnt[key] += 1
    print(f"{'total ms':>9} {'calls':>6} {'mean us':>9}  kernel [grid]")
    for key in sorted(tot, key=tot.get, reverse=True)[:top]:
        print(f"{tot[key] / 1e6:9.3f} {cnt[key]:6d} {tot[key] / cnt[key] / 1e3:9.1f}  {key[0]} {key[1]}")
    print(f"all kernels: {sum(tot.values()) / 1e6:.3f} ms in {sum(cnt.values())} launches")


if __name__ == "__main__":
    main()
