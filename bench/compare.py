"""The table of BENCHMARKS.md: blocktune's native family against cuBLASLt's block-scaled FP8 GEMM
and blocktune's classic family, per DeepSeek-V3 shape and batch size, from the interleaved
timings of bench/sidebyside.py.

Usage: python3 bench/compare.py SIDEBYSIDE.jsonl [--copy-tbps 4.25]
Rows with native_pdl_us (sidebyside.py --pdl) also get a second table: the native kernels with
and without programmatic dependent launch. The memory floor is the GEMM's bytes at --copy-tbps,
the device's measured copy rate (default the H100's). Last, issue 4's FP8 targets, each with
what the run reaches and whether it holds (the INT8 one is bench/int8_table.py's)."""
import argparse, json, math, re

COPY_TBPS = 3.0  # measured device-to-device copy bandwidth on the H100 (bytes read + written)
# The keys of a classic (SGLang-format) entry in the order the tuner writes them: a run's csv.
CLASSIC_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def classic_csv(entry):
    """A classic entry as a run's csv ("64,128,128,32,4,3")."""
    return ",".join(str(entry[k]) for k in CLASSIC_KEYS)


def classic_entry(csv):
    """A run's csv as a classic entry."""
    return dict(zip(CLASSIC_KEYS, (int(v) for v in csv.split(","))))


def geomean(xs):
    """The geometric mean of positive numbers (nan for none); the tables' scripts share it."""
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def config_name(N, K, device, dtype, block="[128, 128]", native=True):
    """The config file name the tuner writes (and SGLang opens, without the native suffix);
    device or block "*" makes it a glob pattern."""
    return f"N={N},K={K},device_name={device},dtype={dtype},block_shape={block}" + (",kernel=native" if native else "") + ".json"


def config(kernel):
    """'native BLOCK_SIZE_M=128 BLOCK_SIZE_N=128 ... (config ...)' -> '128,128,...'"""
    return ",".join(re.findall(r"=(\d+)", kernel.split("(")[0])) or kernel


def gemm_bytes(N, K, M):
    """Bytes one GEMM moves: A, B, their fp32 scales (128-wide blocks) and a 16-bit C."""
    ks, ns = math.ceil(K / 128), math.ceil(N / 128)
    return M * K + N * K + 4 * (M * ks + ns * ks) + 2 * M * N


def tflops(N, K, M, us):
    """A GEMM's rate in TFLOPS (2 M N K flops in `us` microseconds); the tables' scripts share it."""
    return 2 * M * N * K / us / 1e6


def floor_us(N, K, M, tbps=COPY_TBPS):
    """gemm_bytes at the copy bandwidth."""
    return gemm_bytes(N, K, M) / (tbps * 1e6)


def pdl_table(rows, tbps):
    print("\n| N | K | M | native us | % of floor | with PDL us | % of floor | PDL gain | cuBLASLt us |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        N, K, M, n, d, p = r["N"], r["K"], r["M"], r["native_us"], r["native_pdl_us"], r["peer_us"]
        f = floor_us(N, K, M, tbps)
        print(f"| {N} | {K} | {M} | {n:.2f} | {100 * f / n:.0f}% | {d:.2f} | {100 * f / d:.0f}% | "
              f"{n / d:.3f}x | {f'{p:.2f}' if p else '-'} |")


def targets(rows, peer, cla, tbps):
    """Issue 4's FP8 targets over one run's rows, one line each: what they reach, and whether it
    holds. peer and cla: (speedup over cuBLASLt or the classic kernel, row) where each ran."""
    def holds(ok):
        return "holds" if ok else "does not hold"

    g = geomean([s for s, _ in peer])
    print(f"\n- geomean speedup over cuBLASLt >= 1.15: {g:.3f} over {len(peer)} points: {holds(g >= 1.15)}")
    for name, sp in (("cuBLASLt", peer), ("the classic kernel", cla)):
        if not sp:
            continue
        s, r = min(sp, key=lambda x: x[0])
        print(f"- every point faster than {name}: {sum(x > 1 for x, _ in sp)} of {len(sp)}, the closest "
              f"({r['N']}, {r['K']}) M = {r['M']} at {s:.3f}x: {holds(s > 1)}")
    # M <= 128 on the shapes whose weights are at least 16 MB: each shape's lowest share of the floor.
    share = {}
    for r in rows:
        if r["M"] <= 128 and r["N"] * r["K"] >= 16e6:
            f = floor_us(r["N"], r["K"], r["M"], tbps)
            share.setdefault((r["N"], r["K"]), []).append((f / r["native_us"], f / r.get("native_pdl_us", math.inf)))
    if share:
        low = {shape: (min(s for s, _ in v), min(p for _, p in v)) for shape, v in share.items()}
        met = sum(lo >= 0.85 for lo, _ in low.values())
        cells = ", ".join(f"({N}, {K}) {100 * lo:.0f}%" + (f" ({100 * pdl:.0f}% with PDL)" if pdl else "")
                          for (N, K), (lo, pdl) in low.items())
        print(f"- M <= 128, weights >= 16 MB, >= 85% of the floor at {tbps} TB/s: {met} of {len(low)} shapes "
              f"(the lowest point of each: {cells}): {holds(met == len(low))}")
    large = [r for r in rows if r["M"] >= 2048 and r["N"] >= 2048 and r["K"] >= 2048]
    if large:
        tf = geomean([tflops(r["N"], r["K"], r["M"], r["native_us"]) for r in large])
        lt = [tflops(r["N"], r["K"], r["M"], r["peer_us"]) for r in large if r["peer_us"]]
        print(f"- M >= 2048, N, K >= 2048, >= 1300 TFLOPS geomean: {tf:.0f} over {len(large)} points "
              f"(cuBLASLt {geomean(lt):.0f}): {holds(tf >= 1300)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", help="sidebyside.py's output")
    ap.add_argument("--copy-tbps", type=float, default=COPY_TBPS,
                    help="the device's copy bandwidth, bytes read + written, TB/s (default %(default)s)")
    o = ap.parse_args()
    if o.copy_tbps <= 0:
        ap.error("--copy-tbps must be positive")
    rows = [json.loads(line) for line in open(o.jsonl) if line.startswith("{")]
    print("| N | K | M | native us | config | TFLOPS | % of memory floor | cuBLASLt us | classic us | vs cuBLASLt | vs classic |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sp_peer, sp_cla = [], []  # (speedup, row)
    for r in rows:
        N, K, M, n, p, c = r["N"], r["K"], r["M"], r["native_us"], r["peer_us"], r["classic_us"]
        if p:
            sp_peer.append((p / n, r))
        sp_cla.append((c / n, r))
        print(f"| {N} | {K} | {M} | {n:.2f} | {config(r['native_kernel'])} | {tflops(N, K, M, n):.0f} | "
              f"{100 * floor_us(N, K, M, o.copy_tbps) / n:.0f}% | {f'{p:.2f}' if p else '-'} | {c:.2f} | "
              f"{f'{p / n:.2f}x' if p else 'refused'} | {c / n:.2f}x |")
    print(f"\ngeomean speedup over cuBLASLt block-scaled: {geomean([s for s, _ in sp_peer]):.3f} over {len(sp_peer)} "
          f"points; over the classic kernel: {geomean([s for s, _ in sp_cla]):.3f} over {len(sp_cla)} points")
    if rows and all("native_pdl_us" in r for r in rows):
        pdl_table(rows, o.copy_tbps)
    targets(rows, sp_peer, sp_cla, o.copy_tbps)


if __name__ == "__main__":
    main()
