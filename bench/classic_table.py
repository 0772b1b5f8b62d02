"""Classic family: the tuned config against the runtime's default config (SGLang's: 64, 128,
128, 32, 4 warps, 3 stages), per shape and batch size, from the provenance sidecars in a config
directory (each file's last run). Usage: python3 bench/classic_table.py CONFIG_DIR"""
import glob, json, math, sys

rows, speedups = [], []
for f in sorted(glob.glob(f"{sys.argv[1]}/*.provenance.json")):
    if ",kernel=" in f:
        continue
    run = json.load(open(f))["runs"][-1]
    space = run["search_space"].split("/")[-1]
    for m, r in sorted(run["results"].items(), key=lambda kv: int(kv[0])):
        if "default_us" in r:
            speedups.append(r["speedup"])
        rows.append((run["N"], run["K"], int(m), space, r))
print("| N | K | M | space | tuned config | tuned us | TFLOPS | default us | speedup |")
print("|---|---|---|---|---|---|---|---|---|")
for N, K, M, space, r in sorted(rows):
    print(f"| {N} | {K} | {M} | {space} | {r['config']} | {r['us']:.2f} | {r['tflops']:.0f} | "
          f"{r.get('default_us', '-')} | {r.get('speedup', '-')}x |")
g = math.exp(sum(map(math.log, speedups)) / len(speedups))
print(f"\ngeomean speedup of the tuned config over the default: {g:.3f} over {len(speedups)} points")
