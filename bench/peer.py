"""cuBLASLt's block-scaled FP8 GEMM through torch._scaled_mm (1x128 activation scales, 128x128
weight scales), timed the way blocktune times its kernels: a CUDA graph of back-to-back calls
rotating over input copies totalling >= 4x L2, one warm-up replay, median of 10 replays.

Usage: python3 bench/peer.py --shapes 7168x2304,576x7168 --ms 1,16,64 [--out-dtype bfloat16] [--check]
Prints one JSON line per (N, K, M): {"N":..,"K":..,"M":..,"us":..} or {"error": ...}; --check
adds "rel_err", the output's error against a float64 reference."""
import argparse, json, math, random, statistics, time, torch

# SGLang's config for block-wise W8A8 where it has no tuned file (the classic family's fallback).
SGLANG_DEFAULT = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
                  "num_warps": 4, "num_stages": 3}


def make_inputs(M, N, K, dev):
    ks, nb = math.ceil(K / 128), math.ceil(N / 128)
    a = (torch.randn(M, K, device=dev) * 112).clamp(-448, 448).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device=dev) * 112).clamp(-448, 448).to(torch.float8_e4m3fn)
    # scale_a (M, K/128) outer-dim-major; scale_b given as Bs^T with Bs [N/128, K/128] row-major,
    # its rows stored a whole number of 4 K blocks apart (see lt_scale_b).
    sa = (torch.rand(ks, M, device=dev) * 1e-2 + 1e-3).t()
    bs = torch.zeros(nb, (ks + 3) // 4 * 4, device=dev)
    bs[:, :ks] = torch.rand(nb, ks, device=dev) * 1e-3 + 1e-4
    return a, b, sa, bs[:, :ks].t()


def lt_scale_b(sb):
    """The scale_b to give torch._scaled_mm for make_inputs' sb. cuBLASLt reads the rows of Bs a
    whole number of 4 K blocks apart, but torch 2.11 accepts only rows K/128 apart and passes
    the pointer on: with Bs stored so, K = 2304 and 256 came out wrong and once faulted (newer
    torch checks for the padded rows instead). So torch is shown rows K/128 apart over storage
    laid out as cuBLASLt reads it; where K/128 is a multiple of 4 the two are the same."""
    return sb.as_strided(sb.shape, (1, sb.shape[0]))


def rotation_sets(M, N, K):
    """Input sets to rotate over so they total >= 4x L2 (the weights are not served from L2);
    at most 128, as the tuner (tuner/bench.h)."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(2, min(128, math.ceil(4 * l2 / (M * K + N * K + M * N * 2))))


def graph(call, n):
    """A CUDA graph of call(0) .. call(n - 1), captured on a side stream and replayed once."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        call(0)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=side):
            for i in range(n):
                call(i)
    g.replay()
    torch.cuda.synchronize()
    return g


def replay_us(g, n):
    """Microseconds per call of one replay of g (n calls), between two CUDA events."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    g.replay()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1000 / n


def calls_per_replay(call, nsets):
    """How many calls a graph of call(0) .. call(n - 1) needs to last about 2 ms (at least one
    round of the nsets input sets, at most 400), from a replay of one round."""
    est = replay_us(graph(call, nsets), nsets)
    return max(nsets, min(400, math.ceil(2000 / max(est, 0.5))))


def interleaved_us(graphs, n, rounds, rest_ms=0):
    """Median microseconds per call of each graph (n calls each) over `rounds` rounds, every
    round replaying all of them in a new random order (seeded), so that none always runs first
    or always right after the same one (a rotation keeps who follows whom: an INT8 build that
    always came right after the FP8 kernel took up to 9% more time than in random order).
    rest_ms > 0 idles the GPU that long before every replay, so each one starts below the
    board's power limit (the tuner's --rest): back to back, large-M GEMMs run into the limit."""
    names, times = list(graphs), {k: [] for k in graphs}
    rng = random.Random(len(names) * 1000 + rounds)
    for _ in range(rounds):
        order = names[:]
        rng.shuffle(order)
        for k in order:
            if rest_ms > 0:
                time.sleep(rest_ms / 1000)
            times[k].append(replay_us(graphs[k], n))
    return {k: statistics.median(v) for k, v in times.items()}


def add_rest_arg(ap):
    """--rest MS for the scripts that time through interleaved_us (a negative value is a usage error)."""
    def ms(v):
        x = float(v)
        if x < 0:
            raise argparse.ArgumentTypeError(f"{v}: milliseconds, 0 or more")
        return x
    ap.add_argument("--rest", type=ms, default=0, metavar="MS",
                    help="idle the GPU MS milliseconds before every replay (below the power limit at each start)")


def name_value(v):
    """argparse type for NAME=VALUE flags (--lib, --variant, --dir ...): (NAME, VALUE), a usage
    error when either side is missing."""
    name, sep, value = v.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"{v}: expected NAME=VALUE")
    return name, value


def interleaved_calls_us(calls, n, rounds, rest_ms=0):
    """interleaved_us of a graph of n back-to-back calls per call(i) in calls."""
    return interleaved_us({k: graph(c, n) for k, c in calls.items()}, n, rounds, rest_ms)


def bench(M, N, K, out_dtype, dev):
    nsets = rotation_sets(M, N, K)
    sets = [make_inputs(M, N, K, dev) for _ in range(nsets)]
    outs = [torch.empty(M, N, device=dev, dtype=out_dtype) for _ in range(nsets)]

    def call(i):
        a, b, sa, sb = sets[i % nsets]
        torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=lt_scale_b(sb), out_dtype=out_dtype, out=outs[i % nsets])

    n = calls_per_replay(call, nsets)
    g = graph(call, n)
    return statistics.median(replay_us(g, n) for _ in range(10))


def rel_err(c, a, b, sa, sb):
    """c's relative Frobenius error against a float64 GEMM of the same codes and scales (the
    dequantized operands multiplied in float64); sa (M, K / 128) and sb (N / 128, K / 128)."""
    K = a.shape[1]
    A = a.double() * sa.double().repeat_interleave(128, 1)[:, :K]
    B = b.double() * sb.double().repeat_interleave(128, 0)[:b.shape[0]].repeat_interleave(128, 1)[:, :K]
    ref = A @ B.t()
    return ((c.double() - ref).norm() / ref.norm()).item()


def check(M, N, K, out_dtype, dev):
    """cuBLASLt's output's rel_err."""
    a, b, sa, sb = make_inputs(M, N, K, dev)
    c = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=lt_scale_b(sb), out_dtype=out_dtype)
    return rel_err(c, a, b, sa, sb.t())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True)
    p.add_argument("--ms", required=True)
    p.add_argument("--out-dtype", default="bfloat16")
    p.add_argument("--check", action="store_true", help="also the output's error against a float64 reference")
    args = p.parse_args()
    dev = torch.device("cuda")
    dt = getattr(torch, args.out_dtype)
    for shape in args.shapes.split(","):
        N, K = (int(x) for x in shape.split("x"))
        for M in (int(x) for x in args.ms.split(",")):
            rec = {"N": N, "K": K, "M": M, "peer": "torch._scaled_mm block-scaled (cuBLASLt)"}
            try:
                rec["us"] = round(bench(M, N, K, dt, dev), 3)
                if args.check:
                    rec["rel_err"] = float(f"{check(M, N, K, dt, dev):.3g}")
            except Exception as e:  # cuBLASLt refuses M = 1
                rec["error"] = str(e).splitlines()[0][:160]
            print(json.dumps(rec), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
