#!/usr/bin/env bash
# Runs every benchmark program given and writes their tables to docs/benchmarks.md,
# with the command and the machine.
set -eu
build=$1; shift
out=docs/benchmarks.md
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    echo "# Benchmarks"
    echo
    echo "Made by \`make bench\` on $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m);"
    echo "each section names the program that printed it. The graph dumps are read from"
    echo "\`../shared/graphs/kusumoto\` (or \$REMAT_GRAPHS) and skipped where absent."
    for b in "$@"; do
        echo
        echo "## $(basename "$b")"
        echo
        echo "Command: \`$b\`"
        echo
        "$b"
    done
} >"$tmp"
mv "$tmp" "$out"
trap - EXIT
cat "$out"
