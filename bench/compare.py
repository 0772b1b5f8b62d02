"""The table of BENCHMARKS.md: blocktune's native family against cuBLASLt's block-scaled FP8 GEMM
and blocktune's classic family, per DeepSeek-V3 shape and batch size, from the interleaved
timings of bench/sidebyside.py.

Usage: python3 bench/compare.py SIDEBYSIDE.jsonl [--copy-tbps 4.25]
Rows with native_pdl_us (sidebyside.py --pdl) also get a second table: the native kernels with
and without programmatic dependent launch. The memory floor is the GEMM's bytes at --copy-tbps,
the device's measured copy rate (default the H100's)."""
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
    sp_peer, sp_cla = [], []
    for r in rows:
        N, K, M, n, p, c = r["N"], r["K"], r["M"], r["native_us"], r["peer_us"], r["classic_us"]
        if p:
            sp_peer.append(p / n)
        sp_cla.append(c / n)
        print(f"| {N} | {K} | {M} | {n:.2f} | {config(r['native_kernel'])} | {2 * M * N * K / n / 1e6:.0f} | "
              f"{100 * floor_us(N, K, M, o.copy_tbps) / n:.0f}% | {f'{p:.2f}' if p else '-'} | {c:.2f} | "
              f"{f'{p / n:.2f}x' if p else 'refused'} | {c / n:.2f}x |")
    print(f"\ngeomean speedup over cuBLASLt block-scaled: {geomean(sp_peer):.3f} over {len(sp_peer)} points; "
          f"over the classic kernel: {geomean(sp_cla):.3f} over {len(sp_cla)} points")
    if rows and all("native_pdl_us" in r for r in rows):
        pdl_table(rows, o.copy_tbps)


if __name__ == "__main__":
    main()
