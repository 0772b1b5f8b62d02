"""Adopts single entries of one tune's native configs (or, with --family classic, its
SGLang-format ones) into another directory's: the step after a re-tune whose picks were timed
side by side against the shipped ones (bench/variants.py --shipped old=DIR --shipped new=DIR,
with --classic for classic configs), where a new pick is faster at some points and slower at
others. For each --point N,K,M the entry for batch size M of FROM's config for (N, K) replaces
INTO's, and the sidecar of INTO's file gets the FROM run that pick came from (once), with
"adopted": the batch sizes taken from it and "adopted_because": --why (also when INTO's sidecar
already holds that run and a later run there tuned the batch size: an older pick taken back). Each file is written to a
temporary file and renamed, in the formats the tuner writes (the config as SGLang's json.dump
with indent 4, the sidecar as cJSON prints it). It then names SGLang's batch sizes that were not
adopted but whose call now runs another entry (a new key takes over the Ms nearer to it than to
any other), which want a side-by-side run too: an H200 2048 entry adopted where 3072 had none ran
M = 3072 at 0.87-0.89x (BENCHMARKS.md, thirty-third session).

Usage: python3 bench/adopt.py --from NEWDIR --into configs --why "TEXT" --point 24576,7168,2048 ...
       [--dtype fp8_w8a8] [--device NVIDIA_H100_80GB_HBM3] [--family native|classic]
       python3 bench/adopt.py --check configs   (every file there written again in these formats
       must come out byte for byte as it is: what tests/run checks, so that adopted entries read
       as the tuner's own)"""
import argparse, glob, json, os, sys, tempfile

from compare import classic_csv, config_name  # bench/ is on the path


def cjson_string(s):
    out = ['"']
    for ch in s:
        esc = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
        out.append(esc if esc else f"\\u{ord(ch):04x}" if ord(ch) < 32 else ch)
    return "".join(out + ['"'])


def cjson_number(d):
    # cJSON prints a number as an integer where it equals its int (saturated) copy.
    if d == int(d) and abs(d) <= 2**31 - 1:
        return str(int(d))
    s = "%1.15g" % d
    return s if float(s) == d else "%1.17g" % d


def cjson_print(v, depth=1):
    """v as cJSON_Print writes it: tabs, "key":<tab>value, arrays on one line (but a level deeper)."""
    if isinstance(v, dict):
        items = [("\t" * depth) + cjson_string(k) + ":\t" + cjson_print(x, depth + 1) for k, x in v.items()]
        return "{\n" + "".join(i + (",\n" if n + 1 < len(items) else "\n") for n, i in enumerate(items)) + \
            "\t" * (depth - 1) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(cjson_print(x, depth + 1) for x in v) + "]"
    if isinstance(v, str):
        return cjson_string(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return cjson_number(v)


def write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".adopt-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(path):
    """path's JSON, or exit with one line saying why not."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"adopt.py: {path}: {e.strerror if isinstance(e, OSError) else e}")


def config_file(d, N, K, device, dtype, native):
    """The one config of (N, K) and the family in d, or exit with why not."""
    # Any block shape, "[...]" ("[[]" is a literal "[" in a glob): a bare "*" there would also
    # match the classic pattern to the native files and the sidecars.
    pat = config_name(N, K, device or "*", dtype, block="[[]*]", native=native)
    hits = glob.glob(os.path.join(glob.escape(d), pat))
    if len(hits) != 1:
        sys.exit(f"adopt.py: {len(hits)} files match {os.path.join(d, pat)}, expected one")
    return hits[0]


def check(d):
    """The files of d that these formats would not write as they are; exit 1 if any."""
    names = sorted(glob.glob(os.path.join(glob.escape(d), "*.json")))
    bad = []
    for f in names:
        with open(f) as fh:
            text = fh.read()
        try:
            v = json.loads(text)
        except ValueError as e:
            sys.exit(f"adopt.py: {f}: {e}")
        again = cjson_print(v) + "\n" if f.endswith(".provenance.json") else json.dumps(v, indent=4) + "\n"
        if again != text:
            bad.append(os.path.basename(f))
    for b in bad:
        print(f"adopt.py: {os.path.join(d, b)} is not in the format adopt.py writes")
    print(f"{len(names) - len(bad)} of {len(names)} files as adopt.py writes them")
    sys.exit(1 if bad or not names else 0)


# SGLang's tuning batch sizes (search_spaces/default.yaml): the Ms a serving stack is likely to call.
SGLANG_MS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)


def same_run(a, b):
    """Whether two sidecar runs are one tune: every field the same but what was adopted from it.
    A date alone does not tell: two tunes one after the other can end in the same second."""
    mine = ("adopted", "adopted_because")
    return {k: v for k, v in a.items() if k not in mine} == {k: v for k, v in b.items() if k not in mine}


def source_run(side, M):
    """The run of sidecar side that an entry for batch size M came from: the newest that tuned M
    (None if none did)."""
    return next((r for r in reversed(side.get("runs", [])) if str(M) in r.get("results", {})), None)


def not_its_pick(run, M, entry, native):
    """Whether a classic entry is one of run's finalists at M other than its pick (bench/finalists.py
    writes them; it has no native counterpart)."""
    pick = run.get("results", {}).get(str(M), {}).get("config")
    return not native and pick is not None and pick != classic_csv(entry)


def nearest(cfg, M):
    """The batch size whose entry a call with M runs: the nearest, the smaller of two equally near
    (as SGLang and the library pick)."""
    return min(cfg, key=lambda k: (abs(int(k) - M), int(k)))


def moved(before, after, adopted):
    """Batch sizes of SGLANG_MS, not adopted themselves, whose call now runs another entry: that
    of a neighbour adopted where it had none (a 2048 entry adopted where 3072 had none takes
    M = 3072 with it), or the one it ran before, adopted at its own batch size. Each wants a
    side-by-side run of its own."""
    out = []
    for M in SGLANG_MS:
        kb, ka = nearest(before, M), nearest(after, M)
        if str(M) not in adopted and before[kb] != after[ka]:
            out.append((M, kb, ka))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", metavar="DIR", help="only check that DIR's files are in the formats written here")
    ap.add_argument("--from", dest="src")
    ap.add_argument("--into")
    ap.add_argument("--why", help="what the adopted entries were measured to do, for the sidecar")
    ap.add_argument("--point", action="append", help="N,K,M")
    ap.add_argument("--dtype", default="fp8_w8a8")
    ap.add_argument("--device", help="device_name in the file names (default: whichever is there)")
    ap.add_argument("--family", choices=("native", "classic"), default="native")
    a = ap.parse_args()
    if a.check:
        check(a.check)
    for flag in ("src", "into", "why", "point"):
        if not getattr(a, flag):
            ap.error(f"--{'from' if flag == 'src' else flag} is required (or --check DIR)")
    by_file = {}
    for p in a.point:
        try:
            N, K, M = (int(x) for x in p.split(","))
        except ValueError:
            ap.error(f"--point {p}: expected N,K,M")
        by_file.setdefault((N, K), []).append(M)
    native = a.family == "native"
    for (N, K), ms in by_file.items():
        src, dst = (config_file(d, N, K, a.device, a.dtype, native) for d in (a.src, a.into))
        new, cfg = load(src), load(dst)
        before = dict(cfg)
        new_side, side = load(src[:-5] + ".provenance.json"), load(dst[:-5] + ".provenance.json")
        for M in ms:
            if str(M) not in new:
                sys.exit(f"adopt.py: {src} has no batch size {M}")
            cfg[str(M)] = new[str(M)]
            run = source_run(new_side, M)
            if run is None:
                sys.exit(f"adopt.py: no run in {src[:-5]}.provenance.json tuned batch size {M}")
            mine = next((r for r in side["runs"] if same_run(r, run)), None)
            if mine is None:
                mine = dict(run, adopted=[], adopted_because=a.why)
                side["runs"].append(mine)
            elif "adopted" not in mine and (not_its_pick(run, M, new[str(M)], native) or any(
                    str(M) in r.get("results", {}) for r in side["runs"][side["runs"].index(mine) + 1:])):
                # A run that wrote this file itself, taken back at M over a later run's pick, or
                # one of its finalists other than its pick.
                mine["adopted"], mine["adopted_because"] = [], a.why
            # (A run the sidecar already holds without "adopted" wrote this file itself.)
            if M not in mine.get("adopted", [M]):
                mine["adopted"].append(M)
                # A later adoption from the same run keeps its own reason beside the first.
                if a.why and a.why not in mine["adopted_because"]:
                    mine["adopted_because"] += f"; batch size {M}: {a.why}"
        # Batch sizes in numeric order, as the tuner writes them.
        cfg = {k: cfg[k] for k in sorted(cfg, key=int)}
        write_atomic(dst, json.dumps(cfg, indent=4) + "\n")
        write_atomic(dst[:-5] + ".provenance.json", cjson_print(side) + "\n")
        print(f"{os.path.basename(dst)}: adopted {sorted(ms)}")
        for M, kb, ka in moved(before, cfg, {str(m) for m in ms}):
            was = f"instead of the {kb} one" if kb != ka else "adopted at that batch size"
            print(f"  M = {M} now runs the {ka} entry, {was}: time it side by side too")


if __name__ == "__main__":
    main()
