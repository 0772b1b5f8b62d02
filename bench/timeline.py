"""Where the time of a native kernel's call goes, from inside it: a build of the library whose
kernels read %globaltimer at 16 points in every CTA and, at exit, write the readings over the
weight scales (so its outputs are wrong: timing only). Build it with:

    git apply bench/timeline.patch && make BUILD=build/timeline build/timeline/libblocktune.so
    git checkout templates

With --family classic, the classic kernel (its shipped SGLang-format configs) at 7 points of
thread 0, from a build with bench/timeline_classic.patch applied instead.

The calls run in a CUDA graph of back-to-back calls rotating over inputs of >= 4x L2 (the method
of sidebyside.py), with the shipped configs. For the graph's last call, each point's median over
the CTAs in microseconds from the median CTA's start, and "launch_gap": from the last CTA of the
call before leaving to the first CTA of the last call starting.

Usage: python3 bench/timeline.py --shapes 3072x7168,7168x2304 --m 16 [--lib build/timeline/libblocktune.so]
           [--family classic]
Prints one JSON line per shape and replay (--replays, default 3)."""
import argparse, ctypes, json, math, re, sys, tempfile, torch

from peer import graph, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, classic_config_dir, inputs
from compare import CLASSIC_KEYS

# In the order of the patch's slots: thread 0's set-up, the producer thread's path to its first
# copy, the consumers' (warpgroup 0's first thread), the exit, and the first scale arrival.
POINTS = ("entry", "barriers_set", "synced", "prefetched", "first_tile", "slot_free", "first_copy_issued",
          "last_copy_issued", "consumer_ready", "first_data", "last_promoted", "stores_done", "exit",
          "producer_entry", "consumer_synced", "first_scales")
W = len(POINTS)  # words per CTA
# The classic patch's points, thread 0's: the tile known, the prologue's copies issued, the first
# K step's data in shared memory, the last step done, the stores issued (its other words are 0).
CLASSIC_POINTS = ("entry", "tile", "loads_issued", "first_data", "last_step", "stores_done", "exit")
NATIVE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "num_stages", "GROUP_SIZE_M", "CLUSTER_M", "SPLIT_K", "CTAS_PER_SM")


def with_event_room(s, max_ctas):
    """Gives the set weight scales with room after them: CTA b writes its readings over words
    W * b .. W * b + W - 1 of the scales, which may be fewer than W * max_ctas."""
    nb, ks = s["sb"].shape
    buf = torch.zeros(W * max_ctas + nb * ks, device="cuda", dtype=torch.float32)
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
    ap.add_argument("--family", choices=("native", "classic"), default="native")
    o = ap.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    classic = o.family == "classic"
    points, keys = (CLASSIC_POINTS, CLASSIC_KEYS) if classic else (POINTS, NATIVE_KEYS)
    config_dir = classic_config_dir(o.configs) if classic else o.configs
    bt = Blocktune(ctypes.CDLL(o.lib), config_dir, tempfile.mkdtemp(prefix="blocktune-timeline-"))
    M = o.m
    for shape in o.shapes.split(","):
        N, K = map(int, shape.split("x"))
        desc = bt.prepare(M, N, K)
        if classic and not desc.startswith("classic "):  # no classic config: the heuristic's kernel
            sys.exit(f"{shape}: no classic config; the library would run {desc}")
        cfg = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", desc)}
        # The grid, as the launcher sizes it (tuner/family.c): one CTA per tile (classic), or
        # persistent.
        if classic:
            ctas = math.ceil(M / cfg["BLOCK_SIZE_M"]) * math.ceil(N / cfg["BLOCK_SIZE_N"])
        else:
            cl, per = cfg["CLUSTER_M"], cfg["CLUSTER_M"] * cfg["SPLIT_K"]
            units = math.ceil(math.ceil(M / cfg["BLOCK_SIZE_M"]) / cl) * math.ceil(N / cfg["BLOCK_SIZE_N"])
            slots = torch.cuda.get_device_properties(0).multi_processor_count * cfg.get("CTAS_PER_SM", 1) // per
            ctas = min(units, slots) * per
        nsets = rotation_sets(M, N, K)
        sets = [with_event_room(inputs(M, N, K), ctas) for _ in range(nsets)]
        g = graph(lambda i: bt.gemm(sets[i % nsets], M, N, K), nsets)
        for _ in range(o.replays):
            for s in sets:
                s["events"][:W * ctas].zero_()
            g.replay()
            torch.cuda.synchronize()
            # The low 32 bits of the nanosecond timer, from the last two calls.
            words = [[w & 0xffffffff for w in s["events"][:W * ctas].view(torch.int32).tolist()] for s in sets[-2:]]
            before, last = ([w[W * b:W * b + W] for b in range(ctas)] for w in words)
            start = sorted(e[0] for e in last)[ctas // 2]
            rel = lambda x: ((x - start) & 0xffffffff) if ((x - start) & 0xffffffff) < 1 << 31 else -((start - x) & 0xffffffff)
            out = {"N": N, "K": K, "M": M, "family": o.family,
                   "config": ",".join(str(cfg[k]) for k in keys if k in cfg), "ctas": ctas}
            for i, name in enumerate(points):
                v = sorted(rel(e[i]) for e in last if e[i])
                if v:
                    out[name] = round(v[len(v) // 2] / 1000, 2)
            ex = points.index("exit")
            out["last_exit"] = round(max(rel(e[ex]) for e in last) / 1000, 2)
            out["launch_gap"] = round((min(rel(e[0]) for e in last) - max(rel(e[ex]) for e in before)) / 1000, 2)
            print(json.dumps(out), flush=True)
        del sets, g
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
