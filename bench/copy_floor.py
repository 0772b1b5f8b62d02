"""What the memory floor of compare.py leaves out: how close plain memory-bound kernels come to
it at the sizes of the small-M GEMMs. For each shape, the bytes one GEMM moves at M (A, B, both
scales, C); then, timed the way sidebyside.py times (CUDA graphs of back-to-back calls rotating
over buffers totalling >= 4x L2, median of 15 replays): a device-to-device copy of half those
bytes (it reads and writes them), and a max-reduction over all of them (it only reads), each
as a percentage of the floor at COPY_TBPS; and, timed the same way, a kernel that adds 1 to one
element: what a launch costs in such a graph when it moves nothing.

Usage: python3 bench/copy_floor.py --shapes 3072x7168,4608x7168 --m 16
Prints one JSON line per shape."""
import argparse, json, math, statistics, torch

from compare import floor_us, gemm_bytes  # bench/ is on the path
from peer import graph, replay_us


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
        n = max(sets, 200)
        graphs = {k: graph(c, n) for k, c in calls.items()}
        times = {k: statistics.median(replay_us(g, n) for _ in range(15)) for k, g in graphs.items()}
        print(json.dumps({"N": N, "K": K, "M": M, "bytes": nbytes, "floor_us": round(floor, 2),
                          **{f"{k}_us": round(v, 2) for k, v in times.items()},
                          **{f"{k}_pct_of_floor": round(100 * floor / v) for k, v in times.items() if k != "tiny"}}),
              flush=True)
        del graphs, src, dst, red
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
