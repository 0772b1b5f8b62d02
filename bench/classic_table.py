"""Classic family: the tuned config against the runtime's default config (SGLang's: 64, 128,
128, 32, 4 warps, 3 stages), per shape and batch size, from the provenance sidecars in a config
directory (each batch size from the run that gave the file its entry), and beside cuBLASLt's
block-scaled FP8 GEMM when bench/peer.py output is given (same output type: float16).
Usage: python3 bench/classic_table.py CONFIG_DIR [PEER.jsonl]"""
import glob, json, sys

from compare import geomean  # bench/ is on the path

peer = {}
if len(sys.argv) > 2:
    for line in open(sys.argv[2]):
        r = json.loads(line)
        if r.get("us"):
            peer[(r["N"], r["K"], r["M"])] = r["us"]
rows, speedups, vs_peer = [], [], []
for f in sorted(glob.glob(f"{sys.argv[1]}/*.provenance.json")):
    if ",kernel=" in f:
        continue
    # Each batch size from the newest run that gave the file its entry: a run bench/adopt.py
    # appended gave only the batch sizes it lists as "adopted".
    entries = json.load(open(f.replace(".provenance.json", ".json")))
    taken = set()
    for run in reversed(json.load(open(f))["runs"]):
        space = run["search_space"].split("/")[-1]
        for m, r in run["results"].items():
            if m in taken or m not in entries or ("adopted" in run and int(m) not in run["adopted"]):
                continue
            taken.add(m)
            if "default_us" in r:
                speedups.append(r["speedup"])
            rows.append((run["N"], run["K"], int(m), space, r))
cols = "| N | K | M | space | tuned config | tuned us | TFLOPS | default us | speedup |"
print(cols + (" cuBLASLt us | tuned vs cuBLASLt |" if peer else ""))
print("|---" * (9 + 2 * bool(peer)) + "|")
for N, K, M, space, r in sorted(rows):
    line = (f"| {N} | {K} | {M} | {space} | {r['config']} | {r['us']:.2f} | {r['tflops']:.0f} | "
            f"{r.get('default_us', '-')} | {r.get('speedup', '-')}x |")
    if peer:
        p = peer.get((N, K, M))
        if p:
            vs_peer.append(p / r["us"])
        vp = f"{p / r['us']:.2f}x" if p else "refused" if M == 1 else "-"
        line += f" {p if p else '-'} | {vp} |"
    print(line)
print(f"\ngeomean speedup of the tuned config over the default: {geomean(speedups):.3f} over {len(speedups)} points")
if vs_peer:
    print(f"geomean speedup of the tuned config over cuBLASLt block-scaled: {geomean(vs_peer):.3f} over {len(vs_peer)} points")
