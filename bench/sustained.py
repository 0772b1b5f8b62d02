"""Sustained load: each kernel's CUDA graph replayed back to back for a few seconds while
nvidia-smi samples the SM clock, the board power and the throttle reasons every 100 ms. Per
kernel: the median time per call, and the median clock and power over that window less its
first second. It tells whether two kernels differ in cycles or in the clock the board's power
limit leaves them. blocktune's native kernel (through the shipped configs) and cuBLASLt's
block-scaled GEMM alternate, twice each, on every point.

Usage: python3 bench/sustained.py --configs configs --points 24576x7168x4096,7168x16384x4096
       [--seconds 4]
Prints one JSON line per (point, kernel, round)."""
import argparse, ctypes, datetime, json, statistics, subprocess, tempfile, time, torch

from peer import graph, replay_us, rotation_sets  # bench/ is on the path
from sidebyside import Blocktune, inputs, peer


def samples(path):
    """(unix time, MHz, W, throttle reasons) from nvidia-smi's CSV log."""
    rows = []
    with open(path) as f:
        for line in f:
            p = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((t, float(p[1]), float(p[2]), p[3]))
            except (ValueError, IndexError):
                pass  # the header, or a sample cut short when the logger stopped
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="configs")
    ap.add_argument("--points", required=True, help="NxKxM,...")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--lib", default="build/libblocktune.so")
    o = ap.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    native = Blocktune(ctypes.CDLL(o.lib), o.configs, tempfile.mkdtemp(prefix="blocktune-sustained-"))
    log_path = tempfile.mktemp(suffix=".csv")
    log = open(log_path, "w")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "100"], stdout=log)
    runs = []
    try:
        for point in o.points.split(","):
            N, K, M = map(int, point.split("x"))
            nsets = rotation_sets(M, N, K)
            sets = [inputs(M, N, K) for _ in range(nsets)]
            native.prepare(M, N, K)
            calls = {"native": lambda i: native.gemm(sets[i % nsets], M, N, K), "peer": lambda i: peer(sets[i % nsets])}
            graphs = {k: graph(c, 20) for k, c in calls.items()}
            for rnd, order in enumerate((("native", "peer"), ("peer", "native"))):
                for k in order:
                    time.sleep(1.5)  # let the clock recover between kernels
                    t0, ts = time.time(), []
                    while time.time() - t0 < o.seconds:
                        ts.append(replay_us(graphs[k], 20))
                    runs.append({"N": N, "K": K, "M": M, "kernel": k, "round": rnd, "t0": t0, "t1": time.time(),
                                 "us": round(statistics.median(ts), 1), "us_first": round(ts[0], 1)})
            del graphs, sets
            torch.cuda.empty_cache()
        time.sleep(0.5)
    finally:
        smi.terminate()
        smi.wait()
        log.close()
    rows = samples(log_path)
    for r in runs:
        w = [x for x in rows if r["t0"] + 1.0 <= x[0] <= r["t1"]]
        if w:
            r["mhz"] = statistics.median(x[1] for x in w)
            r["watts"] = round(statistics.median(x[2] for x in w), 1)
            r["throttle"] = sorted(set(x[3] for x in w))
        del r["t0"], r["t1"]
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
