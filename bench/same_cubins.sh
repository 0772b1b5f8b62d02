#!/usr/bin/env bash
# Whether the working tree's kernel templates compile to the same cubins as those of REV (a
# commit), candidate for candidate: with no GPU at hand, byte-identical cubins are what says
# that a change to templates/ (a refactor, comments) leaves every measurement standing.
# Compiles, with NVRTC and no GPU, the native space for FP8 and INT8 and SGLang's classic space
# for FP8 (about 2,300 candidates, 8-10 minutes on two cores), and compares SHA-256 sums.
# Usage: bench/same_cubins.sh REV [SPACE-KIND ...]   (kinds: native-fp8 native-int8 classic)
# Exit status 0 when every cubin is identical, 1 when some differ, 2 when a side fails to build
# or compile.
set -eu
rev=$1
shift
kinds=${*:-native-fp8 native-int8 classic}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/base" "$rev" >/dev/null 2>&1 || { echo "cannot check out $rev" >&2; exit 2; }
make -C "$work/base" -j2 BUILD="$work/base-build" "$work/base-build/tune" >/dev/null || { echo "$rev does not build" >&2; exit 2; }
make -C "$root" -j2 BUILD="$work/head-build" "$work/head-build/tune" >/dev/null || { echo "the working tree does not build" >&2; exit 2; }
status=0
for kind in $kinds; do
    case $kind in
    native-fp8) args="--family native --input-type fp8 --out-dtype bfloat16" ;;
    native-int8) args="--family native --input-type int8 --out-dtype bfloat16" ;;
    classic) args="--space search_spaces/default.yaml" ;;
    *) echo "unknown kind $kind" >&2; exit 2 ;;
    esac
    for side in base head; do
        # Both compile the working tree's search spaces: only the templates differ.
        (cd "$root" && "$work/$side-build/tune" $args --N 7168 --K 2304 --dry-run --arch sm_90a \
            --cache-dir "$work/$side-$kind" --quiet >/dev/null) || { echo "$side, $kind: tune failed" >&2; exit 2; }
        (cd "$work/$side-$kind" && find . -name '*.cubin' -exec sha256sum {} + | cut -d' ' -f1 | sort) >"$work/$side-$kind.sums"
    done
    n=$(wc -l <"$work/head-$kind.sums") nbase=$(wc -l <"$work/base-$kind.sums")
    only=$(comm -13 "$work/base-$kind.sums" "$work/head-$kind.sums" | wc -l)
    echo "$kind: $n cubins ($nbase at $rev), $only not among $rev's"
    [ "$only" -eq 0 ] && [ "$n" -eq "$nbase" ] || status=1
done
exit $status
