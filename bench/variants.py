"""The native kernel under several configs on the same GEMMs, interleaved in one process with
cuBLASLt's block-scaled GEMM (the method of sidebyside.py): for questions such as "do 5 stages
beat 4 on this shape" or "is K = 16384 slower per K block than K = 16512".

Usage: python3 bench/variants.py --shapes 7168x16384,7168x16512 --ms 2048,4096 \\
           --variant s4=128,128,4,8,1,1 --variant s5=128,128,5,8,1,1 [--shipped configs] [--rest MS]
A variant is NAME=BLOCK_SIZE_M,BLOCK_SIZE_N,num_stages,GROUP_SIZE_M,CLUSTER_M,SPLIT_K (and
optionally INT8_CONVERT and CTAS_PER_SM), used at every M; --shipped DIR adds DIR's configs as the variant "shipped"
(--shipped NAME=DIR as the variant NAME, so that two config directories can be compared); --pdl times each variant
once more as "NAME+pdl", launched with programmatic dependent launch. Prints one JSON line per
(N, K, M): microseconds per call of each (median of 11 rounds, each replaying every graph in a
random order), cuBLASLt's as "peer", each output's relative difference from the first, and
"heuristic_instead": the variants the device cannot run, timed as the library's heuristic;
--deepgemm DIR adds DeepGEMM's GEMM as "deepgemm" (sidebyside.py says which checkout).
With --classic the --shipped directories are timed through their classic (SGLang-format) files
only, e.g. a classic re-tune against the shipped classic configs."""
import argparse, ctypes, json, os, tempfile, torch

from compare import config_name  # bench/ is on the path
from peer import add_rest_arg, calls_per_replay, interleaved_calls_us, name_value, rotation_sets
from sidebyside import (Blocktune, add_deepgemm, classic_config_dir, deepgemm_precompile, first_outputs, inputs,
                        load_deepgemm, peer, rel_diff)

KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "num_stages", "GROUP_SIZE_M", "CLUSTER_M", "SPLIT_K", "INT8_CONVERT",
        "CTAS_PER_SM")


def config_dir(values, shapes, device, dtypes=("fp8_w8a8",)):
    """A directory of native configs giving every shape, batch size and dtype the same candidate
    (INT8_CONVERT, which only INT8 kernels take, for the INT8 files only)."""
    d = tempfile.mkdtemp(prefix="blocktune-variant-")
    for N, K in shapes:
        for dtype in dtypes:
            entry = {k: v for k, v in zip(KEYS, values) if k != "INT8_CONVERT" or dtype.startswith("int8")}
            name = config_name(N, K, device, dtype)
            with open(os.path.join(d, name), "w") as f:
                json.dump({str(m): entry for m in (1, 4096)}, f)
    return d


def shipped_dir(v):
    """argparse type for --shipped: DIR is the variant "shipped", NAME=DIR the variant NAME."""
    return name_value(v) if "=" in v else ("shipped", v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--ms", required=True)
    ap.add_argument("--variant", action="append", default=[], type=name_value, help="NAME=BM,BN,stages,GM,cluster,split")
    ap.add_argument("--shipped", action="append", default=[], type=shipped_dir,
                    help="a config directory to compare as one more variant (NAME=DIR names it; repeatable)")
    ap.add_argument("--no-peer", action="store_true", help="leave cuBLASLt out")
    ap.add_argument("--classic", action="store_true",
                    help="time each --shipped DIR's classic configs instead of its native ones (no --variant)")
    ap.add_argument("--pdl", action="store_true", help="also time each variant with programmatic dependent launch")
    ap.add_argument("--lib", default="build/libblocktune.so")
    ap.add_argument("--cache", help="compiled-kernel cache; default: a new one")
    ap.add_argument("--deepgemm", metavar="DIR", help="also time DeepGEMM's GEMM from the checkout at DIR")
    add_rest_arg(ap)
    o = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in o.shapes.split(",")]
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()  # the primary context is now current for the library
    device = torch.cuda.get_device_name().replace(" ", "_")
    lib = ctypes.CDLL(o.lib)
    cache = o.cache or tempfile.mkdtemp(prefix="blocktune-variants-")
    if o.classic and o.variant:
        ap.error("--classic takes --shipped directories only, not --variant")
    dirs = {name: classic_config_dir(d) if o.classic else d for name, d in o.shipped}
    for name, values in o.variant:
        vals = [int(x) for x in values.split(",")]
        if not len(KEYS) - 2 <= len(vals) <= len(KEYS):  # the two optional ones may be left out
            ap.error(f"--variant {name}={values}: expected {len(KEYS) - 2} to {len(KEYS)} values ({', '.join(KEYS)})")
        dirs[name] = config_dir(vals, shapes, device)
    if not dirs:
        ap.error("no --variant and no --shipped")
    handles = {name: Blocktune(lib, d, cache) for name, d in dirs.items()}
    if o.pdl:  # each variant once more, with programmatic dependent launch
        handles.update({name + "+pdl": Blocktune(lib, d, cache, pdl=True) for name, d in dirs.items()})
    first = next(iter(handles))
    dg = load_deepgemm(o.deepgemm) if o.deepgemm else None
    if dg:
        deepgemm_precompile(dg, [(M, N, K) for N, K in shapes for M in map(int, o.ms.split(","))])
    for N, K in shapes:
        for M in map(int, o.ms.split(",")):
            nsets = rotation_sets(M, N, K)
            sets = [inputs(M, N, K) for _ in range(nsets)]
            calls, fallback = {}, []
            for name, h in handles.items():
                # A config the device cannot run (too much shared memory, say) is passed over
                # for the built-in heuristic: such a variant times another kernel.
                if "built-in heuristic" in h.prepare(M, N, K):
                    fallback.append(name)
                calls[name] = (lambda h: lambda i: h.gemm(sets[i % nsets], M, N, K))(h)
            if not o.no_peer:
                calls["peer"] = lambda i: peer(sets[i % nsets])
            if dg:
                add_deepgemm(dg, sets, calls)
            errors = {}
            outs = first_outputs(calls, sets[0], errors)
            n = calls_per_replay(calls[first], nsets)
            us = interleaved_calls_us(calls, n, 11, o.rest)
            rec = {"N": N, "K": K, "M": M, "us": {k: round(v, 2) for k, v in us.items()},
                   "rel_diff": {k: float(f"{rel_diff(outs[k], outs[first]):.1e}") for k in outs if k != first}}
            rec.update({f"{k}_error": v for k, v in errors.items()})
            if fallback:
                rec["heuristic_instead"] = fallback
            print(json.dumps(rec), flush=True)
            del sets, outs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
