"""What the memory floor of compare.py leaves out: how close plain memory-bound kernels come to
it at the sizes of the small-M GEMMs. For each shape, the bytes one GEMM moves at M (A, B, both
scales, C); then, timed the way sidebyside.py times (CUDA graphs of back-to-back calls rotating
over buffers totalling >= 4x L2, median of 15 replays): a device-to-device copy of half those
bytes (it reads and writes them), torch's max-reduction over all of them, and a Triton kernel
that only streams them in (each program sums one contiguous chunk; the fastest of a few block
sizes, warp counts and grids), each as a percentage of the floor at COPY_TBPS; and, timed the
same way, a kernel that adds 1 to one element: what a launch costs in such a graph when it
moves nothing.

Usage: python3 bench/copy_floor.py --shapes 3072x7168,4608x7168 --m 16
Prints one JSON line per shape."""
import argparse, json, math, statistics, torch
import triton
import triton.language as tl

from compare import floor_us, gemm_bytes  # bench/ is on the path
from peer import graph, replay_us


@triton.jit
def stream_read(x, out, n, chunk, BLOCK: tl.constexpr):
    """Program p reads x[p * chunk .. (p + 1) * chunk) and writes one sum, so nothing is skipped."""
    start = tl.program_id(0) * chunk
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for off in range(0, chunk, BLOCK):
        i = start + off + tl.arange(0, BLOCK)
        acc += tl.load(x + i, mask=i < n, other=0)
    tl.store(out + tl.program_id(0), tl.sum(acc, 0))


def stream_calls(bufs, sms):
    """One call per (block size, warps, programs per SM) to try: the fastest is the stream time."""
    n = bufs[0].numel()
    out = torch.empty(64 * sms, device="cuda", dtype=torch.int32)
    calls = {}
    for block in (1024, 4096):
        for warps in (4, 8):
            for per_sm in (1, 2, 4, 8):
                chunk = triton.cdiv(triton.cdiv(n, per_sm * sms), block) * block
                grid = (triton.cdiv(n, chunk),)
                calls[f"stream,{block},{warps},{per_sm}"] = (
                    lambda b, w, c, g: lambda i: stream_read[g](bufs[i % len(bufs)], out, n, c, BLOCK=b, num_warps=w)
                )(block, warps, chunk, grid)
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--m", type=int, default=16)
    o = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for shape in o.shapes.split(","):
        N, K = map(int, shape.split("x"))
        M = o.m
        nbytes, floor = gemm_bytes(N, K, M), floor_us(N, K, M)
        sets = max(2, math.ceil(4 * l2 / nbytes))
        src = [torch.randn(nbytes // 4, device="cuda", dtype=torch.float16) for _ in range(sets)]  # nbytes / 2 each
        dst = [torch.empty_like(s) for s in src]
        red = [torch.randn(nbytes // 2, device="cuda", dtype=torch.float16) for _ in range(sets)]  # nbytes each
        out = torch.empty((), device="cuda", dtype=torch.float16)
        one = torch.zeros(1, device="cuda")
        calls = {"copy": lambda i: dst[i % sets].copy_(src[i % sets]),
                 "read": lambda i: torch.amax(red[i % sets], dim=0, out=out),
                 "tiny": lambda i: one.add_(1)}
        streams = stream_calls([r.view(torch.int32) for r in red], torch.cuda.get_device_properties(0).multi_processor_count)
        n = max(sets, 200)
        graphs = {k: graph(c, n) for k, c in {**calls, **streams}.items()}
        times = {k: statistics.median(replay_us(g, n) for _ in range(15)) for k, g in graphs.items()}
        best = min(streams, key=lambda k: times[k])
        times = {**{k: v for k, v in times.items() if k not in streams}, "stream": times[best]}
        print(json.dumps({"N": N, "K": K, "M": M, "bytes": nbytes, "floor_us": round(floor, 2),
                          **{f"{k}_us": round(v, 2) for k, v in times.items()},
                          **{f"{k}_pct_of_floor": round(100 * floor / v) for k, v in times.items() if k != "tiny"},
                          "stream_config": best.split(",", 1)[1]}),
              flush=True)
        del graphs, streams, src, dst, red
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
