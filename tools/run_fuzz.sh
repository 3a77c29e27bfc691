#!/usr/bin/env bash
# Runs the ONNX reader's fuzz target for a bounded time: run_fuzz.sh BINARY SECONDS.
# Seeds: tests/data/tiny.onnx and the model.onnx of ONNX's node tests (libonnx-testdata)
# for the ops remat reads, copied into a scratch corpus. Exits non-zero on a finding
# (libFuzzer writes the input as crash-*/leak-*/oom-*/timeout-* in build/fuzz/).
set -eu
bin=$1; secs=$2
corpus=build/fuzz/corpus
mkdir -p "$corpus"
cp tests/data/tiny.onnx "$corpus/"
for d in /usr/share/libonnx-testdata/data/node/test_{conv,convtranspose,batchnorm,relu,clip,maxpool,averagepool,globalaveragepool,add,concat,flatten,reshape,gemm,matmul,dropout,identity,pad,resize}*; do
    [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$corpus/$(basename "$d").onnx"
done
echo "fuzz: $(ls "$corpus" | wc -l) seeds, $secs s"
cd build/fuzz
"../../$bin" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 corpus 2>&1 | tail -15
