"""Where the time of a native kernel's call goes, from inside it: a build of the library whose
kernels read %globaltimer at 8 points in every CTA and, at exit, write the readings over the
weight scales (so its outputs are wrong: timing only). Build it with:

    git apply bench/timeline.patch && make BUILD=build/timeline build/timeline/libblocktune.so
    git checkout templates

The calls run in a CUDA graph of back-to-back calls rotating over inputs of >= 4x L2 (the method
of sidebyside.py), with the shipped configs. For the graph's last call, each point's median over
the CTAs in microseconds from the median CTA's start, and "launch_gap": from the last CTA of the
call before leaving to the first CTA of the last call starting.

Usage: python3 bench/timeline.py --shapes 3072x7168,7168x2304 --m 16 [--lib build/timeline/libblocktune.so]
Prints one JSON line per shape and replay (--replays, default 3)."""
import argparse, ctypes, json, math, re, tempfile, torch

from peer import graph, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, inputs

POINTS = ("entry", "setup_done", "first_copy_issued", "first_data", "last_copy_issued", "last_promoted",
          "stores_done", "exit")
MAX_CTAS = 132  # the persistent grid is at most one CTA per SM


def with_event_room(s):
    """Gives the set weight scales with room after them: CTA b writes its readings over words
    8b .. 8b + 7 of the scales, which may be fewer than 8 * MAX_CTAS."""
    nb, ks = s["sb"].shape
    buf = torch.zeros(8 * MAX_CTAS + nb * ks, device="cuda", dtype=torch.float32)
    buf[:nb * ks] = s["sb"].flatten()
    s["sb"], s["events"] = buf[:nb * ks].view(nb, ks), buf
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--lib", default="build/timeline/libblocktune.so")
    ap.add_argument("--configs", default="configs")
    ap.add_argument("--replays", type=int, default=3)
    o = ap.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    bt = Blocktune(ctypes.CDLL(o.lib), o.configs, tempfile.mkdtemp(prefix="blocktune-timeline-"))
    M = o.m
    for shape in o.shapes.split(","):
        N, K = map(int, shape.split("x"))
        nsets = rotation_sets(M, N, K)
        sets = [with_event_room(inputs(M, N, K)) for _ in range(nsets)]
        desc = bt.prepare(M, N, K)
        cfg = dict(re.findall(r"(\w+)=(\d+)", desc))
        tiles = math.ceil(M / int(cfg["BLOCK_SIZE_M"])) * math.ceil(N / int(cfg["BLOCK_SIZE_N"]))
        ctas = min(MAX_CTAS, tiles * int(cfg["SPLIT_K"]))
        g = graph(lambda i: bt.gemm(sets[i % nsets], M, N, K), nsets)
        for _ in range(o.replays):
            for s in sets:
                s["events"][:8 * MAX_CTAS].zero_()
            g.replay()
            torch.cuda.synchronize()
            # The low 32 bits of the nanosecond timer, from the last two calls.
            words = [[w & 0xffffffff for w in s["events"][:8 * ctas].view(torch.int32).tolist()] for s in sets[-2:]]
            before, last = ([w[8 * b:8 * b + 8] for b in range(ctas)] for w in words)
            start = sorted(e[0] for e in last)[ctas // 2]
            rel = lambda x: ((x - start) & 0xffffffff) if ((x - start) & 0xffffffff) < 1 << 31 else -((start - x) & 0xffffffff)
            out = {"N": N, "K": K, "M": M, "config": ",".join(cfg[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "num_stages",
                                                                            "GROUP_SIZE_M", "CLUSTER_M", "SPLIT_K")),
                   "ctas": ctas}
            for i, name in enumerate(POINTS):
                v = sorted(rel(e[i]) for e in last if e[i])
                if v:
                    out[name] = round(v[len(v) // 2] / 1000, 2)
            out["last_exit"] = round(max(rel(e[7]) for e in last) / 1000, 2)
            out["launch_gap"] = round((min(rel(e[0]) for e in last) - max(rel(e[7]) for e in before)) / 1000, 2)
            print(json.dumps(out), flush=True)
        del sets, g
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
