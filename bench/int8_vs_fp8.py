"""The native kernel on FP8 and on INT8 inputs with the same config, interleaved in one process
(the method of sidebyside.py), and optionally INT8 through other builds of the library, e.g.
one whose promotion skips the s32 -> f32 conversion (wrong results, timing only):

    sed -i 's/partial_f32(P\\[j \\* 4 + \\([0-3]\\)\\])/__int_as_float(P[j * 4 + \\1])/' templates/native.cuh
    make BUILD=/tmp/nocvt /tmp/nocvt/libblocktune.so && git checkout templates/native.cuh

Usage: python3 bench/int8_vs_fp8.py --shapes 24576x7168,7168x18432 --ms 2048,4096 \\
           [--config 128,128,5,8,1,1[,INT8_CONVERT]] [--variant-lib /tmp/nocvt/libblocktune.so,/tmp/other/libx.so]
           [--int8-variant add=128,128,5,8,1,1,1] [--rounds 11]
Prints one JSON line per (N, K, M): microseconds and TFLOPS of each (a variant library as
"int8_" and its directory's name, an --int8-variant as "int8_" and its name), and how far each
variant's output is from the INT8 one (relative Frobenius norm)."""
import argparse, ctypes, json, os, tempfile, torch

from peer import interleaved_calls_us, name_value, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, first_outputs, inputs, rel_diff
from variants import config_dir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--ms", required=True)
    ap.add_argument("--config", default="128,128,5,8,1,1")
    ap.add_argument("--lib", default="build/libblocktune.so")
    ap.add_argument("--variant-lib", help="comma-separated libraries to time INT8 through as well")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--int8-variant", action="append", default=[], type=name_value,
                    help="NAME=CONFIG: INT8 once more under another config (e.g. with INT8_CONVERT 1)")
    o = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in o.shapes.split(",")]
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    device = torch.cuda.get_device_name().replace(" ", "_")
    d = config_dir(list(map(int, o.config.split(","))), shapes, device, ("fp8_w8a8", "int8_w8a8"))
    kernels = {"fp8": (o.lib, 0), "int8": (o.lib, 1)}
    dirs = {}
    for path in o.variant_lib.split(",") if o.variant_lib else []:
        kernels["int8_" + os.path.basename(os.path.dirname(os.path.abspath(path)))] = (path, 1)
    for name, values in o.int8_variant:
        kernels["int8_" + name] = (o.lib, 1)
        dirs["int8_" + name] = config_dir(list(map(int, values.split(","))), shapes, device, ("int8_w8a8",))
    libs = {path: ctypes.CDLL(path) for path, _ in kernels.values()}
    handles = {k: Blocktune(libs[path], dirs.get(k, d), tempfile.mkdtemp(prefix="blocktune-int8-cache-"))
               for k, (path, _) in kernels.items()}
    for N, K in shapes:
        for M in map(int, o.ms.split(",")):
            nsets = rotation_sets(M, N, K)
            fp8 = [inputs(M, N, K) for _ in range(nsets)]
            int8 = [dict(s, a=torch.randint(-127, 128, (M, K), dtype=torch.int8, device="cuda"),
                         b=torch.randint(-127, 128, (N, K), dtype=torch.int8, device="cuda")) for s in fp8]
            calls = {}
            for k, (_, inp) in kernels.items():
                h, sets = handles[k], int8 if inp else fp8
                h.prepare(M, N, K, inp)
                calls[k] = lambda i, h=h, sets=sets, inp=inp: h.gemm(sets[i % nsets], M, N, K, inp)
            outs = first_outputs(calls, fp8[0])  # the INT8 sets share the FP8 sets' C
            us = {k: round(v, 1) for k, v in interleaved_calls_us(calls, 30, o.rounds).items()}
            rec = {"N": N, "K": K, "M": M, "us": us, "TFLOPS": {k: round(2 * M * N * K / v / 1e6) for k, v in us.items()}}
            variants = [k for k in outs if k.startswith("int8_")]
            if variants:  # 0 where a variant computes the same result
                rec["variant_rel_diff"] = {k: float(f"{rel_diff(outs[k], outs['int8']):.2e}") for k in variants}
            print(json.dumps(rec), flush=True)
            del fp8, int8
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
