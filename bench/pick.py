"""Which entries to adopt: the points where one config directory was faster than another in every
run, from the JSON lines of bench/variants.py (times under "us") or bench/triton_configs.py (each
source's own "us"). Prints one line per point (each run's speed of NEW over OLD, OLD's time over
NEW's) and then the --point flags of bench/adopt.py for the points where NEW was faster by more
than --margin in every run; with --slower, the points where NEW was slower by more than --margin
in every run instead (e.g. entries a Triton run says not to ship). With several --new (the
tuner's finalists, bench/finalists.py), each point takes the NEW whose slowest run was fastest,
and the flags are printed per NEW. A point where OLD has no time (triton_configs.py's directory
has no file for the shape) is listed as not compared.

Usage: python3 bench/pick.py --old old --new new [--new new2 ...] RUN.jsonl... [--margin 0.02] [--slower]"""
import argparse, json


def us(row, name):
    """NAME's microseconds in a row of variants.py ("us": {name: t}) or triton_configs.py ({name: {"us": t}})."""
    return row["us"][name] if "us" in row else row[name]["us"]


def has(row, name):
    return name in (row["us"] if "us" in row else row)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="the directory (variant, source) to beat")
    ap.add_argument("--new", required=True, action="append", help="one or more directories to try")
    ap.add_argument("--margin", type=float, default=0.02, help="relative speed-up every run must show (default 0.02)")
    ap.add_argument("--slower", action="store_true", help="pick the points where NEW lost by more than the margin")
    ap.add_argument("runs", nargs="+", help="JSON lines of the same points, one file per run")
    o = ap.parse_args()
    runs = [[json.loads(line) for line in open(f)] for f in o.runs]
    points = [(row["N"], row["K"], row["M"]) for row in runs[0]]
    if any([(row["N"], row["K"], row["M"]) for row in r] != points for r in runs):
        ap.error(f"{o.runs[0]} and the other runs do not list the same points in the same order")
    for name in o.new:
        if not all(has(row, name) for row in runs[0]):
            ap.error(f"{o.runs[0]}: no times of '{name}' at every point")
    if not any(has(row, o.old) for row in runs[0]):
        ap.error(f"{o.runs[0]}: no times of '{o.old}'")
    picked = {new: [] for new in o.new}
    compared = 0
    for i, point in enumerate(points):
        if not all(has(r[i], o.old) for r in runs):  # OLD has no file for the shape: nothing to beat
            print(*point, f"no {o.old} time, not compared")
            continue
        compared += 1
        speeds = {new: [us(r[i], o.old) / us(r[i], new) for r in runs] for new in o.new}
        # The NEW that did best in its worst run (with --slower, the one that lost most in its best).
        new = max(o.new, key=lambda n: -max(speeds[n]) if o.slower else min(speeds[n]))
        speed = speeds[new]
        hit = max(speed) < 1 - o.margin if o.slower else min(speed) > 1 + o.margin
        if hit:
            picked[new].append(point)
        print(*point, *([new] if len(o.new) > 1 else []), " ".join(f"{s:.3f}" for s in speed),
              *(["picked"] if hit else []))
    print(f"{sum(map(len, picked.values()))} of {compared} points")
    for new, pts in picked.items():
        if len(o.new) == 1:
            print(" ".join("--point %d,%d,%d" % p for p in pts))
        elif pts:
            print(f"{new}: " + " ".join("--point %d,%d,%d" % p for p in pts))

if __name__ == "__main__":
    main()
