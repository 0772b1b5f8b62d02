"""The native kernel on FP8 and on INT8 inputs with the same config, interleaved in one process
(the method of sidebyside.py: graphs of about 2 ms, of 30 calls until the twentieth session),
and optionally INT8 through other builds of the library, e.g. one whose promotion skips the
s32 -> f32 conversion (wrong results, timing only):

    sed -i 's/partial_f32(P\\[j \\* 4 + \\([0-3]\\)\\])/__int_as_float(P[j * 4 + \\1])/' templates/native.cuh
    make BUILD=/tmp/nocvt /tmp/nocvt/libblocktune.so && git checkout templates/native.cuh

With --configs DIR each type runs at its own tuned native configs from DIR instead of one
--config, and INT8 runs once more through the classic kernel ("int8_classic") at SGLang's default
config, which is what SGLang runs for block-wise INT8 where it ships no config (it ships some
for the A100 and H20, none for the H100); cuBLASLt has no block-scaled INT8 GEMM to compare with.

Usage: python3 bench/int8_vs_fp8.py --shapes 24576x7168,7168x18432 --ms 2048,4096 \\
           [--config 128,128,5,8,1,1[,INT8_CONVERT] | --configs DIR]
           [--variant-lib /tmp/nocvt/libblocktune.so,/tmp/other/libx.so]
           [--int8-variant add=128,128,5,8,1,1,1] [--int8-configs NAME=DIR] [--rounds 11] [--cache DIR]
Prints one JSON line per (N, K, M): microseconds and TFLOPS of each (a variant library as
"int8_" and its directory's name, an --int8-variant or --int8-configs as "int8_" and its name: INT8
at one config, or at DIR's native INT8 configs, e.g. another tune's), how far each
variant's output is from the INT8 one (relative Frobenius norm), and with --configs the kernel
each call ran; bench/int8_table.py turns --configs runs into BENCHMARKS.md's tables."""
import argparse, ctypes, json, os, tempfile, torch

from compare import config_name  # bench/ is on the path
from peer import SGLANG_DEFAULT, calls_per_replay, interleaved_calls_us, name_value, rotation_sets
from sidebyside import Blocktune, first_outputs, inputs, rel_diff
from variants import config_dir


def classic_default_dir(shapes, device):
    """INT8 classic configs holding SGLang's default config at every batch size: without a
    config file the library would pick the native heuristic instead."""
    d = tempfile.mkdtemp(prefix="blocktune-classic-int8-")
    for N, K in shapes:
        name = config_name(N, K, device, "int8_w8a8", native=False)
        with open(os.path.join(d, name), "w") as f:
            json.dump({str(m): SGLANG_DEFAULT for m in (1, 4096)}, f)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--ms", required=True)
    ap.add_argument("--config", default="128,128,5,8,1,1")
    ap.add_argument("--configs", help="tuned native configs of both types, and INT8 through the classic kernel too")
    ap.add_argument("--cache", help="compiled-kernel cache; default: a new one per library handle")
    ap.add_argument("--lib", default="build/libblocktune.so")
    ap.add_argument("--variant-lib", help="comma-separated libraries to time INT8 through as well")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--int8-variant", action="append", default=[], type=name_value,
                    help="NAME=CONFIG: INT8 once more under another config (e.g. with INT8_CONVERT 1)")
    ap.add_argument("--int8-configs", action="append", default=[], type=name_value, metavar="NAME=DIR",
                    help="INT8 once more at DIR's native INT8 configs")
    o = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in o.shapes.split(",")]
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    device = torch.cuda.get_device_name().replace(" ", "_")
    if o.configs:
        d = o.configs
        kernels = {"fp8": (o.lib, 0), "int8": (o.lib, 1), "int8_classic": (o.lib, 1)}
        dirs = {"int8_classic": classic_default_dir(shapes, device)}
    else:
        d = config_dir(list(map(int, o.config.split(","))), shapes, device, ("fp8_w8a8", "int8_w8a8"))
        kernels = {"fp8": (o.lib, 0), "int8": (o.lib, 1)}
        dirs = {}
    for path in o.variant_lib.split(",") if o.variant_lib else []:
        kernels["int8_" + os.path.basename(os.path.dirname(os.path.abspath(path)))] = (path, 1)
    for name, values in o.int8_variant:
        kernels["int8_" + name] = (o.lib, 1)
        dirs["int8_" + name] = config_dir(list(map(int, values.split(","))), shapes, device, ("int8_w8a8",))
    for name, path in o.int8_configs:
        kernels["int8_" + name], dirs["int8_" + name] = (o.lib, 1), path
    libs = {path: ctypes.CDLL(path) for path, _ in kernels.values()}
    handles = {k: Blocktune(libs[path], dirs.get(k, d), o.cache or tempfile.mkdtemp(prefix="blocktune-int8-cache-"))
               for k, (path, _) in kernels.items()}
    for N, K in shapes:
        for M in map(int, o.ms.split(",")):
            nsets = rotation_sets(M, N, K)
            fp8 = [inputs(M, N, K) for _ in range(nsets)]
            int8 = [dict(s, a=torch.randint(-127, 128, (M, K), dtype=torch.int8, device="cuda"),
                         b=torch.randint(-127, 128, (N, K), dtype=torch.int8, device="cuda")) for s in fp8]
            calls, desc = {}, {}
            for k, (_, inp) in kernels.items():
                h, sets = handles[k], int8 if inp else fp8
                desc[k] = h.prepare(M, N, K, inp)
                calls[k] = lambda i, h=h, sets=sets, inp=inp: h.gemm(sets[i % nsets], M, N, K, inp)
            outs = first_outputs(calls, fp8[0])  # the INT8 sets share the FP8 sets' C
            n = calls_per_replay(calls["fp8"], nsets)  # ~2 ms a replay, every input set in it
            us = {k: round(v, 2) for k, v in interleaved_calls_us(calls, n, o.rounds).items()}
            rec = {"N": N, "K": K, "M": M, "us": us, "TFLOPS": {k: round(2 * M * N * K / v / 1e6) for k, v in us.items()}}
            variants = [k for k in outs if k.startswith("int8_")]
            if variants:  # 0 where a variant computes the same result
                rec["variant_rel_diff"] = {k: float(f"{rel_diff(outs[k], outs['int8']):.2e}") for k in variants}
            if o.configs:
                rec["kernels"] = desc
            print(json.dumps(rec), flush=True)
            del fp8, int8
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
