"""The tuner's finalists as config directories, for a kernel that may rank them otherwise than
the CUDA port does: the classic files are shipped for SGLang's Triton kernel, and the port's
picks at the output-bound shapes ran 0.957x the Triton-chosen entries there (BENCHMARKS.md, "The
output-bound classic entries tuned again after the stores").

For each SGLang-format (classic) config in FROM and each batch size of the newest run of its
sidecar that tuned it, directory OUT/fK gets that run's K-th fastest finalist as timed again
(the tuner writes them under "finalists", the pick first), or its pick where the run had fewer.
Each fK holds the sidecar too, so `bench/adopt.py --family classic --from OUT/fK` takes an entry
from it with its run; the shipped-config test accepts a finalist other than the pick only where
the sidecar says it was adopted.

Then, on the GPU: python3 bench/triton_configs.py --dir shipped=configs --dir f1=OUT/f1 ...
--dir f8=OUT/f8 --shapes ... --ms ...  (two runs), and python3 bench/pick.py --old shipped
--new f1 ... --new f8 RUN1.jsonl RUN2.jsonl for the adopt.py flags of each fK
(bench/triton_finalists.sh runs the three steps).

Usage: python3 bench/finalists.py FROM OUT"""
import glob, json, os, shutil, sys

from adopt import load, source_run  # bench/ is on the path
from compare import classic_entry


def main():
    if len(sys.argv) != 3:
        print(__doc__.rsplit("\n\n", 1)[1], file=sys.stderr)
        sys.exit(2)
    src, out = sys.argv[1:]
    files = sorted(f for f in glob.glob(os.path.join(glob.escape(src), "*.json"))
                   if not f.endswith(".provenance.json") and ",kernel=" not in f)
    if not files:
        sys.exit(f"finalists.py: no classic config files in {src}")
    ranked = {}
    for f in files:
        side = f[:-5] + ".provenance.json"
        cfg, prov = load(f), load(side)
        ranked[f] = {}
        for M in cfg:
            run = source_run(prov, M)
            res = run["results"][M] if run else {}
            fin = [x["config"] for x in res.get("finalists", [])] or ([res["config"]] if "config" in res else [])
            if not fin:
                sys.exit(f"finalists.py: {side}: no run tuned batch size {M}")
            ranked[f][M] = fin
    # Every directory holds every file, so that each shape has a config in each source.
    most = max(len(v) for r in ranked.values() for v in r.values())
    for k in range(most):
        d = os.path.join(out, f"f{k + 1}")
        os.makedirs(d, exist_ok=True)
        for f, r in ranked.items():
            picks = {M: classic_entry(v[k] if k < len(v) else v[0]) for M, v in r.items()}
            with open(os.path.join(d, os.path.basename(f)), "w") as fh:
                fh.write(json.dumps(picks, indent=4) + "\n")
            side = f[:-5] + ".provenance.json"
            shutil.copyfile(side, os.path.join(d, os.path.basename(side)))
    print(f"{len(files)} config file(s), up to {most} finalists a batch size: {out}/f1..f{most}")


if __name__ == "__main__":
    main()
