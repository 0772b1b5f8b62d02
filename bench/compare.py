"""Side-by-side table for BENCHMARKS.md: native (tuned) vs the tuned classic kernel vs cuBLASLt's
block-scaled FP8 GEMM (bench/peer.py), per DeepSeek-V3 shape and batch size.

Usage: python3 bench/compare.py NATIVE_CONFIG_DIR CLASSIC_CONFIG_DIR PEER.jsonl
Reads the provenance sidecars (the last run of each) that `tune` writes beside its configs."""
import glob, json, math, sys

SHAPES = [(576, 7168), (24576, 7168), (32768, 512), (7168, 16384), (7168, 18432), (4608, 7168),
          (3072, 7168), (4096, 512), (3072, 1536), (512, 7168), (7168, 2304), (7168, 2048), (7168, 256)]
COPY_TBPS = 3.0  # measured device-to-device copy bandwidth on the H100 (bytes read + written)


def results(d, kernel):
    out = {}
    for f in glob.glob(f"{d}/*.provenance.json"):
        if (",kernel=native" in f) != (kernel == "native"):
            continue
        run = json.load(open(f))["runs"][-1]
        for m, r in run["results"].items():
            out[(run["N"], run["K"], int(m))] = r
    return out


def main():
    nat, cla = results(sys.argv[1], "native"), results(sys.argv[2], "classic")
    peer = {}
    for line in open(sys.argv[3]):
        r = json.loads(line)
        peer[(r["N"], r["K"], r["M"])] = r.get("us")
    print("| N | K | M | native us | config | TFLOPS | % of memory floor | cuBLASLt us | classic us | vs cuBLASLt | vs classic |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sp_peer, sp_cla = [], []
    for N, K in SHAPES:
        for M in (1, 16, 64, 128, 512, 2048, 4096):
            n = nat.get((N, K, M))
            if not n:
                continue
            p, c = peer.get((N, K, M)), cla.get((N, K, M))
            ks, ns = math.ceil(K / 128), math.ceil(N / 128)
            floor_us = (M * K + N * K + 4 * (M * ks + ns * ks) + 2 * M * N) / (COPY_TBPS * 1e6)
            vp = f"{p / n['us']:.2f}x" if p else "refused"
            vc = f"{c['us'] / n['us']:.2f}x" if c else "-"
            if p:
                sp_peer.append(p / n["us"])
            if c:
                sp_cla.append(c["us"] / n["us"])
            print(f"| {N} | {K} | {M} | {n['us']:.2f} | {n['config']} | {2 * M * N * K / n['us'] / 1e6:.0f} | "
                  f"{100 * floor_us / n['us']:.0f}% | {p if p else '-'} | {c['us'] if c else '-'} | {vp} | {vc} |")
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    print(f"\ngeomean speedup over cuBLASLt block-scaled: {g(sp_peer):.3f} over {len(sp_peer)} points; "
          f"over the tuned classic kernel: {g(sp_cla):.3f} over {len(sp_cla)} points")


if __name__ == "__main__":
    main()
