"""The tables of BENCHMARKS.md's INT8 sections from bench/int8_vs_fp8.py --configs output: INT8
native time per shape and batch size with its speedup over INT8 in the classic kernel, and FP8
time over INT8 time per run, then the summaries the text quotes.

Usage: python3 bench/int8_table.py RUN1.jsonl [RUN2.jsonl ...]
The first run gives the time table; every run gives a column in the ratio table and a summary
line: the speedup over the classic kernel (geomean, range, points faster), FP8 time over INT8
time at M <= 64, M = 128, M = 512 and at the large-M points (M >= 2048, N and K >= 2048) with
their TFLOPS geomeans, and the largest relative difference between the two kernels' outputs."""
import argparse, json

from compare import geomean, tflops as rate  # bench/ is on the path


def load(path):
    """(N, K, M) -> record, in the file's order."""
    rows = (json.loads(line) for line in open(path) if line.startswith("{"))
    return {(r["N"], r["K"], r["M"]): r for r in rows}


def ratio(r):
    """FP8 time over INT8 time: above 1 INT8 is faster."""
    return r["us"]["fp8"] / r["us"]["int8"]


def tflops(r, kernel):
    return rate(r["N"], r["K"], r["M"], r["us"][kernel])


def summary(name, rows):
    cla = [r["us"]["int8_classic"] / r["us"]["int8"] for r in rows]
    print(f"{name}: INT8 native over classic: geomean {geomean(cla):.3f} over {len(cla)}, {min(cla):.2f}-{max(cla):.2f}x, "
          f"faster at {sum(c > 1 for c in cla)}")
    for label, sel in (("M <= 64", lambda r: r["M"] <= 64), ("M = 128", lambda r: r["M"] == 128),
                       ("M = 512", lambda r: r["M"] == 512)):
        xs = [ratio(r) for r in rows if sel(r)]
        if xs:
            print(f"  FP8 / INT8 time, {label}: {min(xs):.2f}-{max(xs):.2f}, geomean {geomean(xs):.3f} over {len(xs)}")
    big = [r for r in rows if r["M"] >= 2048 and r["N"] >= 2048 and r["K"] >= 2048]
    if big:
        xs = [ratio(r) for r in big]
        tf = {k: geomean([tflops(r, k) for r in big]) for k in ("int8", "fp8", "int8_classic")}
        print(f"  FP8 / INT8 time, M >= 2048 and N, K >= 2048: {min(xs):.2f}-{max(xs):.2f} over {len(xs)}; TFLOPS "
              f"geomean INT8 {tf['int8']:.0f}, FP8 {tf['fp8']:.0f}, INT8 classic {tf['int8_classic']:.0f}")
    diffs = [r["variant_rel_diff"]["int8_classic"] for r in rows if "variant_rel_diff" in r]
    if diffs:
        print(f"  largest relative difference, classic against native INT8 output: {max(diffs):g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="int8_vs_fp8.py --configs outputs of the same points")
    o = ap.parse_args()
    runs = [load(p) for p in o.runs]
    first = runs[0]
    shapes = list(dict.fromkeys((N, K) for N, K, _ in first))
    ms = sorted({M for _, _, M in first})
    head = "| N | K | " + " | ".join(f"M = {m}" for m in ms) + " |\n|---|---|" + "---|" * len(ms)
    cell = lambda r, f: f(r) if r else "-"
    print(head)
    for N, K in shapes:
        print(f"| {N} | {K} | " + " | ".join(cell(first.get((N, K, m)), lambda r: "%.2f (%.2fx)" % (
            r["us"]["int8"], r["us"]["int8_classic"] / r["us"]["int8"])) for m in ms) + " |")
    print("\n" + head)
    for N, K in shapes:
        print(f"| {N} | {K} | " + " | ".join(
            ", ".join(cell(run.get((N, K, m)), lambda r: f"{ratio(r):.2f}") for run in runs) for m in ms) + " |")
    print()
    for path, run in zip(o.runs, runs):
        summary(path, list(run.values()))


if __name__ == "__main__":
    main()
