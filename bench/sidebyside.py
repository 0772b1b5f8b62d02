"""The three kernels on the same GEMMs, timed in one process, interleaved: blocktune's native
family and its classic family (through libblocktune and the configs the tuner wrote) and
cuBLASLt's block-scaled FP8 GEMM (torch._scaled_mm, 1x128 / 128x128 scales). Each is a CUDA
graph of back-to-back calls rotating over input sets totalling >= 4x L2 (~2 ms per replay);
15 rounds, each replaying the graphs in a new random order; the median of each. All three
read the same FP8 codes and scales (cuBLASLt's activation scales M-major, ours row-major).

With --pdl a fourth graph runs the native kernels with programmatic dependent launch
(blocktune_options.pdl): each call is set up while the call before it finishes.

With --deepgemm DIR a fifth graph runs DeepGEMM's gemm_fp8_fp8_bf16_nt (a DeepGEMM checkout of
the pure-Python JIT era, e.g. commit 8702f91, with CUTLASS's cute/ and cutlass/ headers under
deep_gemm/include; it is not part of blocktune and none of it is in this repository) on the
same codes and scales, with the config its own heuristic picks, as a serving stack calls it.
Its kernels are compiled (nvcc, in parallel) before the first point.

Usage: python3 bench/sidebyside.py --configs configs --shapes 7168x2304,576x7168 --ms 16,4096
       [--cache DIR] [--pdl] [--rest MS] [--deepgemm DIR]
Prints one JSON line per (N, K, M): native_us, classic_us, peer_us (null where cuBLASLt
refuses), native_pdl_us with --pdl, deepgemm_us and deepgemm_config with --deepgemm, the native
kernel, and each output's relative difference from the native one."""
import argparse, concurrent.futures, ctypes, glob, importlib, json, os, sys, tempfile, torch

from peer import add_rest_arg, calls_per_replay, interleaved_calls_us, lt_scale_b, make_inputs, rotation_sets  # bench/ is on the path


class Args(ctypes.Structure):
    _fields_ = [("A", ctypes.c_uint64), ("B", ctypes.c_uint64), ("As", ctypes.c_uint64), ("Bs", ctypes.c_uint64),
                ("C", ctypes.c_uint64), ("M", ctypes.c_long), ("N", ctypes.c_long), ("K", ctypes.c_long),
                ("input", ctypes.c_int), ("output", ctypes.c_int), ("block_n", ctypes.c_int),
                ("block_k", ctypes.c_int)]


class Opts(ctypes.Structure):
    _fields_ = [("config_dir", ctypes.c_char_p), ("cache_dir", ctypes.c_char_p), ("pdl", ctypes.c_int)]


class Blocktune:
    """One libblocktune handle over one config directory."""

    def __init__(self, lib, config_dir, cache_dir, pdl=False):
        self.lib, self.err, self.h = lib, ctypes.create_string_buffer(512), ctypes.c_void_p()
        opts = Opts(config_dir.encode(), cache_dir.encode(), int(pdl))
        if lib.blocktune_open(ctypes.byref(self.h), ctypes.byref(opts), self.err, 512):
            sys.exit("blocktune_open: " + self.err.value.decode())

    def check(self, rc, what):
        if rc:
            raise RuntimeError(f"{what}: {self.err.value.decode()}")

    def prepare(self, M, N, K, input=0):
        """Compiles the kernel for (M, N, K) of input type `input` (0 FP8, 1 INT8); its description."""
        a = Args(0, 0, 0, 0, 0, M, N, K, input, 1, 128, 128)
        self.check(self.lib.blocktune_prepare(self.h, ctypes.byref(a), (ctypes.c_long * 1)(M), 1, self.err, 512),
                   "blocktune_prepare")
        desc = ctypes.create_string_buffer(512)
        self.lib.blocktune_describe(self.h, ctypes.byref(a), desc, 512)
        return desc.value.decode()

    def gemm(self, s, M, N, K, input=0):
        a = Args(s["a"].data_ptr(), s["b"].data_ptr(), s["sa"].data_ptr(), s["sb"].data_ptr(), s["c"].data_ptr(),
                 M, N, K, input, 1, 128, 128)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.lib.blocktune_gemm(self.h, ctypes.byref(a), stream, self.err, 512), "blocktune_gemm")


def classic_config_dir(configs):
    """A directory that holds only the classic (SGLang-format) configs of `configs`, for a handle
    that must dispatch the classic family."""
    d = tempfile.mkdtemp(prefix="blocktune-classic-")
    for f in glob.glob(os.path.join(configs, "*.json")):
        if ",kernel=native" not in f:
            os.symlink(os.path.abspath(f), os.path.join(d, os.path.basename(f)))
    return d


def inputs(M, N, K):
    """peer.py's inputs, with our layouts of the same scales beside cuBLASLt's."""
    a, b, sa_peer, sb_peer = make_inputs(M, N, K, "cuda")
    return {"a": a, "b": b, "sa": sa_peer.contiguous(), "sa_peer": sa_peer, "sb": sb_peer.t().contiguous(),
            "sb_peer": lt_scale_b(sb_peer),
            "c": torch.empty(M, N, device="cuda", dtype=torch.bfloat16)}


def peer(s):
    torch._scaled_mm(s["a"], s["b"].t(), scale_a=s["sa_peer"], scale_b=s["sb_peer"], out_dtype=torch.bfloat16,
                     out=s["c"])


def peer_per_tensor(s):
    """cuBLASLt's FP8 GEMM of the same codes with one scale per operand: no block scaling to do."""
    one = torch.ones((), device=s["a"].device)
    torch._scaled_mm(s["a"], s["b"].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=s["c"])


def load_deepgemm(path):
    """The deep_gemm package of the checkout at path."""
    sys.path.insert(0, os.path.abspath(path))
    return importlib.import_module("deep_gemm")


def deepgemm_keys(dg, M, N, K):
    """The template keys (as DeepGEMM's gemm_fp8_fp8_bf16_nt derives them) of its kernel for
    (M, N, K), with the launch-independent arguments its code generator reads."""
    from deep_gemm.jit_kernels.gemm import get_best_configs
    from deep_gemm.jit_kernels.runtime import GemmType
    _, bm, bn, stages, (mc, on_a), smem = get_best_configs(M, N, K, 1, dg.get_num_sms())
    return {"N": N, "K": K, "BLOCK_M": bm, "BLOCK_N": bn, "SWIZZLE_D_MODE": smem[1],
            "BLOCK_N_PADDING": smem[2], "NUM_STAGES": stages, "NUM_TMA_MULTICAST": mc,
            "IS_TMA_MULTICAST_ON_A": on_a, "GEMM_TYPE": GemmType.Normal, "NUM_GROUPS": 1,
            "BLOCK_K": 128, "NUM_TMA_THREADS": 128, "NUM_MATH_THREADS_PER_GROUP": 128}


def deepgemm_precompile(dg, points):
    """Builds DeepGEMM's kernels for all (M, N, K) in points at once (its JIT compiles one at a
    time, on the first call); the calls then find them in its cache."""
    from deep_gemm.jit import build
    from deep_gemm.jit_kernels.runtime import FP8GemmRuntime
    def one(code):
        try:
            build("gemm_fp8_fp8_bf16_nt", code, FP8GemmRuntime)
        except Exception as e:  # the point's call fails again and records why
            print(f"deepgemm: build failed: {e}", file=sys.stderr)

    codes = {FP8GemmRuntime.generate(**deepgemm_keys(dg, *p)) for p in points}
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as ex:
        list(ex.map(one, codes))


def add_deepgemm(dg, sets, calls):
    """calls["deepgemm"]: DeepGEMM's GEMM of the input sets. It reads the activation scales
    M-major with M padded to 16 bytes: converted here, so that the timed call is the GEMM alone."""
    for s in sets:
        s["sa_dg"] = dg.get_col_major_tma_aligned_tensor(s["sa"])

    def call(i):
        s = sets[i % len(sets)]
        dg.gemm_fp8_fp8_bf16_nt((s["a"], s["sa_dg"]), (s["b"], s["sb"]), s["c"])
    calls["deepgemm"] = call


def rel_diff(x, ref):
    return ((x.float() - ref.float()).norm() / ref.float().norm()).item()


def first_outputs(calls, s, errors=None):
    """Each call's output for input set s (C poisoned with NaN before each); a call to cuBLASLt
    ("peer", "peer_tensor") that it refuses (M = 1) or to DeepGEMM that fails is dropped from
    calls, and its error's first line kept in errors[name] where a dict is given."""
    outs = {}
    for name in list(calls):
        s["c"].fill_(float("nan"))
        try:
            calls[name](0)
            torch.cuda.synchronize()
            outs[name] = s["c"].clone()
        except (RuntimeError, AssertionError) as e:
            if not name.startswith(("peer", "deepgemm")):
                raise
            del calls[name]
            if errors is not None:
                errors[name] = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
    return outs


def point(native, classic, M, N, K, pdl=None, rest_ms=0, dg=None):
    nsets = rotation_sets(M, N, K)
    sets = [inputs(M, N, K) for _ in range(nsets)]
    kernel = native.prepare(M, N, K)
    classic.prepare(M, N, K)
    calls = {"native": lambda i: native.gemm(sets[i % nsets], M, N, K),
             "classic": lambda i: classic.gemm(sets[i % nsets], M, N, K),
             "peer": lambda i: peer(sets[i % nsets])}
    if pdl:  # the same kernels, each allowed to start while the one before it finishes
        pdl.prepare(M, N, K)
        calls["native_pdl"] = lambda i: pdl.gemm(sets[i % nsets], M, N, K)
    if dg:
        add_deepgemm(dg, sets, calls)
    errors = {}
    outs = first_outputs(calls, sets[0], errors)
    n = calls_per_replay(calls["native"], nsets)
    us = interleaved_calls_us(calls, n, 15, rest_ms)
    res = {"N": N, "K": K, "M": M, "native_kernel": kernel}
    if dg:
        k = deepgemm_keys(dg, M, N, K)
        res["deepgemm_config"] = ",".join(str(k[x]) for x in ("BLOCK_M", "BLOCK_N", "NUM_STAGES", "NUM_TMA_MULTICAST"))
    for name in ("native", "classic", "peer", "native_pdl", "deepgemm"):
        if (name == "native_pdl" and not pdl) or (name == "deepgemm" and not dg):
            continue
        res[f"{name}_us"] = round(us[name], 3) if name in us else None
        if name != "native" and name in outs:
            res[f"{name}_rel_diff"] = float(f"{rel_diff(outs[name], outs['native']):.2e}")
        if name in errors:
            res[f"{name}_error"] = errors[name]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="configs")
    ap.add_argument("--lib", default="build/libblocktune.so")
    ap.add_argument("--cache", help="compiled-kernel cache (e.g. filled by tune --dry-run); default: a new one")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--ms", required=True)
    ap.add_argument("--pdl", action="store_true",
                    help="also time the native graph with programmatic dependent launch (native_pdl_us)")
    ap.add_argument("--deepgemm", metavar="DIR",
                    help="also time DeepGEMM's GEMM from the checkout at DIR (deepgemm_us)")
    add_rest_arg(ap)
    o = ap.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()  # the primary context is now current for the library
    lib = ctypes.CDLL(o.lib)
    cache = o.cache or tempfile.mkdtemp(prefix="blocktune-sbs-")
    native = Blocktune(lib, o.configs, cache)
    classic = Blocktune(lib, classic_config_dir(o.configs), cache)
    pdl = Blocktune(lib, o.configs, cache, pdl=True) if o.pdl else None
    points = [(M, *map(int, shape.split("x"))) for shape in o.shapes.split(",") for M in map(int, o.ms.split(","))]
    dg = load_deepgemm(o.deepgemm) if o.deepgemm else None
    if dg:
        deepgemm_precompile(dg, points)
    for M, N, K in points:
        print(json.dumps(point(native, classic, M, N, K, pdl, o.rest, dg)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
