#!/usr/bin/env bash
# Fills the kernel cache DIR from every build/cache-*.tar.xz carried to the GPU machine: a tar of
# one directory holding a cache that `tune --dry-run --arch sm_90a --cache-dir D` filled on a
# machine without a GPU, so the device compiles nothing it already has.
# Usage: bench/unpack_caches.sh DIR
set -eu
mkdir -p "$1"
for t in build/cache-*.tar.xz; do
    [ -f "$t" ] || continue
    xz -dc "$t" | tar -C "$1" --strip-components=1 --skip-old-files -xf -
done
