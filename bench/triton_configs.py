"""Do classic configs carry over to a Triton kernel? blocktune tunes its classic family on its
own CUDA port of SGLang's kernel, and serving stacks run their Triton kernel with the configs.
This script runs configs from several directories (blocktune's, SGLang's and vLLM's shipped
files for this device) and SGLang's default config in one Triton block-scaled W8A8 kernel,
written here from the meaning of the six keys: one BLOCK_SIZE_M x BLOCK_SIZE_N output tile per
program, programs ordered in groups of GROUP_SIZE_M tile rows, BLOCK_SIZE_K per step, the step's
product scaled by its activation and weight block scales, num_warps and num_stages as Triton's.
A directory's config for M is the one under the nearest batch size key, as SGLang picks it.

Timed the way sidebyside.py times: per (shape, M) a CUDA graph of back-to-back calls rotating
over input sets totalling >= 4x L2 for each distinct config, replayed in interleaved rounds in
random order, the median of each. Every distinct config's output is checked first against a
float64 GEMM of the same codes and scales (relative Frobenius error; float16 out, the output
type SGLang runs its Triton kernel for).

Usage: python3 bench/triton_configs.py --dir ours=configs --dir sglang=DIR [--dir vllm=DIR]
       --shapes 24576x7168,32768x512 --ms 1,16,4096 [--restage ours=3] [--rounds 15] [--rest MS]
       [--input-type int8]
--restage NAME=S also times NAME's config with num_stages S (source "NAME/sS").
--input-type int8 runs the directories' int8_w8a8 files on 8-bit integer codes, the product of
each step in s32 and then scaled, as SGLang's block-wise INT8 kernel does.
Prints one JSON line per (N, K, M): each source's config and microseconds, and rel_err."""
import argparse, glob, json, math, os, torch
import triton
import triton.language as tl

from peer import (SGLANG_DEFAULT, add_rest_arg, calls_per_replay, interleaved_calls_us, make_inputs,  # bench/ is
                  name_value, rel_err, rotation_sets)  # on the path

QB = 128  # quantization block along N and K


@triton.jit
def block_scaled_mm(a, b, c, a_s, b_s, M, N, K, ks, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                    BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, QBN: tl.constexpr, QBK: tl.constexpr,
                    ZERO: tl.constexpr):
    """C[M, N] = sum over K blocks of (A[:, kb] @ B[:, kb]^T) * a_s[:, kb] * b_s[n // QBN, kb];
    A (M, K) and B (N, K) row-major 8-bit codes, a_s (M, ks) and b_s (N / QBN, ks) row-major."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_SIZE_M), tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * tiles_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows = tl.minimum(tiles_m - first_m, GROUP_SIZE_M)
    tm = first_m + (pid % per_group) % rows
    tn = (pid % per_group) // rows
    rm = tm * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = tn * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    rk = tl.arange(0, BLOCK_SIZE_K)
    # Rows and columns past the edge wrap round to the first ones and are not stored, as in
    # SGLang's kernel; reading row M - 1 for all of them instead ran tiles taller than M 1.4-1.9x
    # slower than SGLang's kernel does (BENCHMARKS.md, "Rows past M").
    am, bn = rm % M, rn % N
    a_ptr = a + am[:, None] * K + rk[None, :]
    b_ptr = b + bn[None, :] * K + rk[:, None]  # a (BLOCK_SIZE_K, BLOCK_SIZE_N) view of B^T
    as_ptr, bs_ptr = a_s + am * ks, b_s + (bn // QBN) * ks
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        left = K - k * BLOCK_SIZE_K
        x = tl.load(a_ptr, mask=rk[None, :] < left, other=ZERO)
        w = tl.load(b_ptr, mask=rk[:, None] < left, other=ZERO)
        kb = k * BLOCK_SIZE_K // QBK
        # FP8 codes multiply into float32, INT8 codes into int32, converted before the scales.
        acc += tl.dot(x, w).to(tl.float32) * tl.load(as_ptr + kb)[:, None] * tl.load(bs_ptr + kb)[None, :]
        a_ptr += BLOCK_SIZE_K
        b_ptr += BLOCK_SIZE_K
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(cfg, a, b, sa, sb, c):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]) * triton.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    block_scaled_mm[grid](a, b, c, sa, sb, M, N, K, sa.shape[1], BLOCK_SIZE_M=cfg["BLOCK_SIZE_M"],
                          BLOCK_SIZE_N=cfg["BLOCK_SIZE_N"], BLOCK_SIZE_K=cfg["BLOCK_SIZE_K"],
                          GROUP_SIZE_M=cfg["GROUP_SIZE_M"], QBN=QB, QBK=QB,
                          ZERO=0 if a.dtype == torch.int8 else 0.0,  # Triton casts no int to FP8
                          num_warps=cfg["num_warps"],
                          num_stages=cfg["num_stages"])


def inputs(M, N, K, dev, int8=False):
    """peer.py's codes and scales, the scales row-major: (M, K / 128) and (N / 128, K / 128);
    with int8, codes drawn from [-127, 127] instead of the FP8 ones."""
    a, b, sa, sb = make_inputs(M, N, K, dev)
    if int8:
        a = torch.randint(-127, 128, (M, K), device=dev, dtype=torch.int8)
        b = torch.randint(-127, 128, (N, K), device=dev, dtype=torch.int8)
    return a, b, sa.contiguous(), sb.t().contiguous()


def config_for(directory, N, K, M, device, dtype="fp8_w8a8"):
    """The directory's config for (N, K) at M (nearest batch size key), or None without a file."""
    # block_shape=[128, 128] (SGLang) or [128,128] (vLLM); not the native files, not sidecars
    files = [f for f in glob.glob(os.path.join(directory, f"N={N},K={K},device_name={device},dtype={dtype},*.json"))
             if ",kernel=" not in f and not f.endswith(".provenance.json")]
    if not files:
        return None
    table = json.load(open(files[0]))
    return table[min(table, key=lambda x: abs(int(x) - M))]


def restage(v):
    """NAME=S, S a stage count."""
    name, st = name_value(v)
    if not st.isdigit() or int(st) < 1:
        raise argparse.ArgumentTypeError(f"{v}: NAME=S, S a stage count")
    return name, int(st)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", action="append", required=True, type=name_value, metavar="NAME=DIR",
                    help="a config directory")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--ms", required=True)
    ap.add_argument("--restage", action="append", default=[], type=restage, metavar="NAME=S",
                    help="also NAME's config with num_stages S")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--input-type", choices=("fp8", "int8"), default="fp8")
    add_rest_arg(ap)
    o = ap.parse_args()
    dirs = dict(o.dir)
    dev = torch.device("cuda")
    device = torch.cuda.get_device_name().replace(" ", "_")
    for shape in o.shapes.split(","):
        N, K = (int(x) for x in shape.split("x"))
        for M in (int(x) for x in o.ms.split(",")):
            cfgs = {name: config_for(d, N, K, M, device, f"{o.input_type}_w8a8") for name, d in dirs.items()}
            for name, st in o.restage:
                if cfgs.get(name):
                    cfgs[f"{name}/s{st}"] = {**cfgs[name], "num_stages": st}
            cfgs["default"] = SGLANG_DEFAULT
            cfgs = {k: v for k, v in cfgs.items() if v is not None}
            distinct = []  # each distinct config is timed once
            for v in cfgs.values():
                if v not in distinct:
                    distinct.append(v)
            nsets = rotation_sets(M, N, K)
            sets = [inputs(M, N, K, dev, o.input_type == "int8") for _ in range(nsets)]
            outs = [[torch.empty(M, N, device=dev, dtype=torch.float16) for _ in range(nsets)] for _ in distinct]
            errs = []
            for i, cfg in enumerate(distinct):
                outs[i][0].fill_(float("nan"))  # poisoned: an unwritten element fails the check
                run(cfg, *sets[0], outs[i][0])
                errs.append(rel_err(outs[i][0], *sets[0]))
            calls = {i: (lambda i: lambda j: run(distinct[i], *sets[j % nsets], outs[i][j % nsets]))(i)
                     for i in range(len(distinct))}
            n = calls_per_replay(calls[distinct.index(SGLANG_DEFAULT)], nsets)
            us = interleaved_calls_us(calls, n, o.rounds, o.rest)
            rec = {"N": N, "K": K, "M": M}
            for name, v in cfgs.items():
                i = distinct.index(v)
                rec[name] = {"config": ",".join(str(v[k]) for k in SGLANG_DEFAULT), "us": round(us[i], 3),
                             "rel_err": float(f"{errs[i]:.3g}")}
            print(json.dumps(rec), flush=True)
            del sets, outs, calls
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
