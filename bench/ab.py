"""A/B of libblocktune builds on the same GEMMs: each build's kernels (from one config
directory) and cuBLASLt's block-scaled FP8 GEMM, timed in one process with the method of
sidebyside.py (CUDA graphs over rotated inputs, replayed in a random order each round, the median of the
rounds). For a kernel change, build the library without it into a directory of its own (the
Makefile puts libcjson.so.1 beside it, which the library's rpath $ORIGIN finds):

    git stash && make BUILD=build/before build/before/libblocktune.so && git stash pop && make
    python3 bench/ab.py --lib before=build/before/libblocktune.so --lib after=build/libblocktune.so \\
        --points 24576x7168x4096,7168x2304x16 [--rounds 11] [--configs configs] [--configs-for NAME=DIR]
        [--cache DIR] [--no-peer] [--pdl] [--rest MS]

A point is NxKxM. Prints one JSON line per point: the first build's kernel ("kernel", and
"kernel_NAME" for each build that runs another), microseconds per call of each build and of
cuBLASLt ("peer", absent where it refuses the shape), each one's TFLOPS, and the largest
relative difference of the builds' outputs from the first build's ("diff"; cuBLASLt's as
"peer_diff"). --per-tensor also times cuBLASLt's FP8 GEMM with one scale per operand
("peer_tensor"), and --summary ends with the geometric mean TFLOPS of each over the points.

What block scaling costs: the native kernel beside the same kernel built without it (every K
block accumulates into one register array and the sum is scaled once; wrong results, timing
only) and beside cuBLASLt with and without block scales:

    git apply bench/noscale.patch && make BUILD=build/noscale build/noscale/libblocktune.so
    git checkout templates
    python3 bench/ab.py --lib native=build/libblocktune.so --lib noscale=build/noscale/libblocktune.so \
        --points 24576x7168x2048,... --per-tensor --summary"""
import argparse, ctypes, json, math, tempfile, torch

from peer import add_rest_arg, calls_per_replay, interleaved_calls_us, name_value, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, first_outputs, inputs, peer, peer_per_tensor, rel_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", action="append", required=True, type=name_value, help="NAME=PATH of a libblocktune.so")
    ap.add_argument("--points", required=True, help="comma-separated NxKxM")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--configs", default="configs")
    ap.add_argument("--configs-for", action="append", default=[], type=name_value,
                    help="NAME=DIR: build NAME reads DIR instead of --configs (e.g. deeper rings only it can run)")
    ap.add_argument("--cache", help="compiled-kernel cache; default: a new one")
    ap.add_argument("--no-peer", action="store_true", help="leave cuBLASLt out")
    ap.add_argument("--pdl", action="store_true",
                    help="launch the builds' kernels programmatically (blocktune_options.pdl), each call set up "
                         "while the one before it finishes")
    ap.add_argument("--per-tensor", action="store_true", help="also time cuBLASLt's per-tensor FP8 GEMM")
    ap.add_argument("--summary", action="store_true", help="end with each one's geomean TFLOPS")
    add_rest_arg(ap)
    o = ap.parse_args()
    libs = dict(o.lib)
    points = [tuple(int(x) for x in p.split("x")) for p in o.points.split(",")]
    torch.zeros(1, device="cuda")
    cache = o.cache or tempfile.mkdtemp(prefix="blocktune-ab-")
    cfg = dict(o.configs_for)
    handles = {name: Blocktune(ctypes.CDLL(path), cfg.get(name, o.configs), cache, o.pdl) for name, path in libs.items()}
    names = list(handles)
    logs = {}
    for N, K, M in points:
        nsets = rotation_sets(M, N, K)
        sets = [inputs(M, N, K) for _ in range(nsets)]
        kernels = {n: h.prepare(M, N, K) for n, h in handles.items()}
        calls = {n: (lambda i, h=h: h.gemm(sets[i % nsets], M, N, K)) for n, h in handles.items()}
        if not o.no_peer:
            calls["peer"] = lambda i: peer(sets[i % nsets])
        if o.per_tensor:
            calls["peer_tensor"] = lambda i: peer_per_tensor(sets[i % nsets])
        outs = first_outputs(calls, sets[0])
        n = calls_per_replay(calls[names[0]], nsets)
        us = interleaved_calls_us(calls, n, o.rounds, o.rest)
        res = {"N": N, "K": K, "M": M, "kernel": kernels[names[0]], "calls_per_replay": n}
        res.update({"kernel_" + k: d for k, d in kernels.items() if d != kernels[names[0]]})
        for k, v in us.items():
            res[k] = round(v, 2)
            res[k + "_tflops"] = round(2.0 * M * N * K / v / 1e6)
            logs.setdefault(k, []).append(math.log(2.0 * M * N * K / v / 1e6))
        res["diff"] = max((rel_diff(outs[k], outs[names[0]]) for k in names[1:]), default=0.0)
        if "peer" in outs:
            res["peer_diff"] = rel_diff(outs["peer"], outs[names[0]])
        print(json.dumps(res), flush=True)
        del sets, outs
        torch.cuda.empty_cache()
    if o.summary:
        print(json.dumps({"geomean_TFLOPS": {k: round(math.exp(sum(v) / len(v))) for k, v in logs.items()},
                          "points": {k: len(v) for k, v in logs.items()}}))


if __name__ == "__main__":
    main()
