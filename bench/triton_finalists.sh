#!/usr/bin/env bash
# On the GPU machine, after a classic tune (bench/tune_runs.sh, configs in /tmp/configs): its
# finalists (bench/finalists.py) and the shipped files timed in the Triton stand-in, RUNS runs
# (default 2), then bench/pick.py's choice per point: the adopt.py flags of each finalist
# directory that beat the shipped entry by more than 2% in every run.
# Usage: bench/triton_finalists.sh SHAPES MS   e.g. 7168x2304,4096x512 512,1024,2048
# SHIPPED=DIR sets the files to beat (default configs; for a shape with no file there yet, the
# tune's own, TUNED=DIR, default /tmp/configs). ALSO="name=DIR ..." times more directories beside
# them, for reference only (SGLang's shipped files, say).
# Output: $OUT/tri_<run>.jsonl, $OUT/pick.txt, and the finalist directories in $OUT/finalists.tar.
# INTO=DIR then adopts the winners into DIR's files (the tune's own: INTO=/tmp/configs), with
# WHY as the sidecar's reason; otherwise, where the files are kept: python3 bench/adopt.py
# --family classic --from finalists/fK --into configs --why ... <pick.txt's flags for fK>.
set -eu
shapes=$1 ms=$2
out=${OUT:-/tmp/out}
tuned=${TUNED:-/tmp/configs} shipped=${SHIPPED:-configs}
fin=/tmp/finalists
rm -rf "$fin"
python3 bench/finalists.py "$tuned" "$fin"
dirs=() news=()
for d in ${ALSO:-}; do dirs+=(--dir "$d"); done
for d in "$fin"/f*; do
    dirs+=(--dir "$(basename "$d")=$d")
    news+=(--new "$(basename "$d")")
done
runs=()
for r in $(seq "${RUNS:-2}"); do
    python3 bench/triton_configs.py --dir shipped="$shipped" "${dirs[@]}" --shapes "$shapes" --ms "$ms" \
        >"$out/tri_$r.jsonl"
    runs+=("$out/tri_$r.jsonl")
done
tar -C /tmp -cf "$out/finalists.tar" finalists
python3 bench/pick.py --old shipped "${news[@]}" "${runs[@]}" >"$out/pick.txt"
tail -n 9 "$out/pick.txt"
[ -n "${INTO:-}" ] || exit 0
device=$(python3 -c 'import torch; print(torch.cuda.get_device_name().replace(" ", "_"))')
why=${WHY:-"a finalist of its tune; in SGLang's Triton kernel faster than the entry it replaces by more than 2% in each of ${RUNS:-2} runs (bench/triton_finalists.sh, $(date -u '+%Y-%m-%d %H:%M') UTC)"}
grep '^f[0-9]*:' "$out/pick.txt" | while IFS=: read -r fk points; do
    # $points is pick.py's flags, one --point N,K,M each: split on purpose.
    # shellcheck disable=SC2086
    python3 bench/adopt.py --family classic --device "$device" --from "$fin/$fk" --into "$INTO" --why "$why" $points
done
