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
    echo
    echo "## remat depth"
    echo
    echo "The deepest ResNet (bottleneck blocks (3, 8, k, 3)) each strategy fits in 4 GiB at"
    echo "batch 16, 224x224 (parameters, gradients, momentum and the kernels' scratch, each"
    echo "convolution at the fastest algorithm that fits, counted), each confirmed by one training
step on the cpu backend (measured peaks,"
    echo "device and host tier, equal to the planned ones). superneurons and hybrid offload to"
    echo "the host tier; parameters, their gradients and momentum stay resident."
    echo
    echo "Command: \`$build/remat depth --budget 4GiB --batch 16 --input-size 224x224 --threads $(nproc)\`"
    echo
    echo '```'
    "$build/remat" depth --budget 4GiB --batch 16 --input-size 224x224 --threads "$(nproc)" 2>/dev/null
    echo '```'
} >"$tmp"
mv "$tmp" "$out"
trap - EXIT
cat "$out"
