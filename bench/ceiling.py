"""What block scaling costs, and what the same GEMM reaches without it: the native kernel with
the shipped configs, the same kernel built without block scaling (every K block accumulates into
one register array and the sum is scaled once, wrong results, timing only), cuBLASLt's
block-scaled FP8 GEMM and cuBLASLt's per-tensor FP8 GEMM (one scale for A, one for B), all
interleaved in one process with the method of sidebyside.py. Build the unscaled kernel with:

    git apply bench/noscale.patch && make BUILD=build/noscale build/noscale/libblocktune.so
    git checkout templates

Usage: python3 bench/ceiling.py --points 24576x7168x2048,7168x2304x4096 \\
           [--noscale-lib build/noscale/libblocktune.so] [--configs configs] [--rounds 11]
A point is NxKxM. Prints one JSON line per point (microseconds and TFLOPS of each), then the
geometric mean TFLOPS of each over the points."""
import argparse, ctypes, json, math, tempfile, torch

from peer import calls_per_replay, interleaved_calls_us, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, inputs, peer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", required=True, help="comma-separated NxKxM")
    ap.add_argument("--lib", default="build/libblocktune.so")
    ap.add_argument("--noscale-lib", default="build/noscale/libblocktune.so")
    ap.add_argument("--configs", default="configs")
    ap.add_argument("--rounds", type=int, default=11)
    o = ap.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()  # the primary context is now current for the libraries
    # One compile cache each: both builds compile the same source names to different kernels.
    libs = {"native": o.lib, "noscale": o.noscale_lib}
    handles = {k: Blocktune(ctypes.CDLL(v), o.configs, tempfile.mkdtemp(prefix=f"blocktune-{k}-"))
               for k, v in libs.items()}
    one = torch.ones((), device="cuda")
    logs = {}
    for p in o.points.split(","):
        N, K, M = map(int, p.split("x"))
        nsets = rotation_sets(M, N, K)
        sets = [inputs(M, N, K) for _ in range(nsets)]
        for h in handles.values():
            h.prepare(M, N, K)
        calls = {k: (lambda h: lambda i: h.gemm(sets[i % nsets], M, N, K))(h) for k, h in handles.items()}
        calls["cublaslt_block"] = lambda i: peer(sets[i % nsets])

        def per_tensor(i):
            s = sets[i % nsets]
            torch._scaled_mm(s["a"], s["b"].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=s["c"])

        calls["cublaslt_tensor"] = per_tensor
        us = interleaved_calls_us(calls, calls_per_replay(calls["native"], nsets), o.rounds)
        tflops = {k: 2 * M * N * K / v / 1e6 for k, v in us.items()}
        for k, v in tflops.items():
            logs.setdefault(k, []).append(math.log(v))
        print(json.dumps({"N": N, "K": K, "M": M, "us": {k: round(v, 2) for k, v in us.items()},
                          "TFLOPS": {k: round(v) for k, v in tflops.items()}}), flush=True)
        del sets
        torch.cuda.empty_cache()
    print(json.dumps({"geomean_TFLOPS": {k: round(math.exp(sum(v) / len(v))) for k, v in logs.items()},
                      "points": len(next(iter(logs.values())))}))


if __name__ == "__main__":
    main()
