#!/usr/bin/env bash
# Runs the readers' fuzz targets for a bounded time: run_fuzz.sh SECONDS BINARY...
# SECONDS is the total, shared equally by the targets, which run one after another.
# Each target fuzz_X has its own corpus, $(dirname BINARY)/corpus-X, seeded by the
# project:
#   fuzz_onnx    tests/data/tiny.onnx, tiny_tf.onnx and the model.onnx of ONNX's node tests
#                (libonnx-testdata) for the ops remat reads
#   fuzz_dump    the tiny dump of tests/test_dump.c, a copy with the records reordered,
#                and the authors' smallest dumps when ../shared/graphs/kusumoto has them
#   fuzz_data    data files of one, two and three samples (docs/formats.md)
#   fuzz_params  tests/data/*.prm and the parameters of the target's own trainer
#                (FUZZ_SEED_OUT)
#   fuzz_tokens  token files of uint16 and int32 tokens and a line of text
# Prints one line per target: inputs run, seconds, finding or not. Exits non-zero on a
# finding (libFuzzer writes the input as crash-*/leak-*/oom-*/timeout-* in the binary's
# folder).
set -eu
secs=$1; shift
[ $# -gt 0 ] || { echo "usage: run_fuzz.sh SECONDS BINARY..." >&2; exit 2; }
each=$(( secs / $# )); [ "$each" -ge 1 ] || each=1
root=$(pwd)

seed_onnx() {
    cp tests/data/tiny.onnx tests/data/tiny_tf.onnx "$1/"
    for d in /usr/share/libonnx-testdata/data/node/test_{conv,convtranspose,batchnorm,relu,clip,maxpool,averagepool,globalaveragepool,add,concat,flatten,reshape,gemm,matmul,dropout,identity,pad,resize}*; do
        [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$1/$(basename "$d").onnx"
    done
    return 0
}

seed_dump() {
    # tests/test_dump.c's tiny dump: input, parameter, conv, relu, loss
    printf '%s' "5 6
0 100 0
1 40 /W
2 200 _
3 200 _
4 4 _
forward
2 1
0 _
1 _
2
Convolution2DFunction
{}
forward
1 1
2 _
3
ReLU
{}
forward
1 1
3 _
4
SoftmaxCrossEntropy
{}
backward
3 1
2 gradient
0 input
1 input
1
Convolution2DFunction
{}
backward
2 1
3 gradient
3 output
2
ReLU
{}
backward
2 1
4 gradient
3 input
3
SoftmaxCrossEntropy
{}
" >"$1/tiny.txt"
    # the same in CRLF lines
    sed 's/$/\r/' "$1/tiny.txt" >"$1/tiny_crlf.txt"
    for g in cg_vgg19.txt cg_unet.txt; do
        [ -f ../shared/graphs/kusumoto/$g ] && cp ../shared/graphs/kusumoto/$g "$1/"
    done
    return 0
}

seed_data() {
    /usr/bin/python3 - "$1" <<'PYEOF'
import struct, sys
for n, c, h, w in ((1, 1, 1, 1), (2, 3, 2, 2), (3, 1, 4, 2)):
    with open('%s/d%d%d%d%d.bin' % (sys.argv[1], n, c, h, w), 'wb') as f:
        f.write(b'REMATDAT' + struct.pack('<4q', n, c, h, w))
        f.write(struct.pack('<%df' % (n * c * h * w), *[0.5 * i for i in range(n * c * h * w)]))
        f.write(struct.pack('<%di' % n, *range(n)))
PYEOF
}

seed_tokens() {
    /usr/bin/python3 - "$1" <<'PYEOF'
import struct, sys
for width, vocab, n in ((2, 50, 20), (4, 70000, 9), (2, 1, 1)):
    with open('%s/t%d_%d.tok' % (sys.argv[1], width, n), 'wb') as f:
        f.write(b'REMATTOK' + struct.pack('<IIqiI', 1, width, n, vocab, 0))
        f.write(struct.pack('<%d%s' % (n, 'H' if width == 2 else 'i'), *[(7 * i) % vocab for i in range(n)]))
with open('%s/text.txt' % sys.argv[1], 'wb') as f:
    f.write(b'the quick brown fox jumps over the lazy dog\n')
PYEOF
}

seed_params() {
    cp tests/data/*.prm "$1/"
    FUZZ_SEED_OUT="$1/own.prm" "$2" >/dev/null 2>&1
}

status=0
for bin in "$@"; do
    name=$(basename "$bin"); what=${name#fuzz_}
    dir=$(cd "$(dirname "$bin")" && pwd)
    corpus=$dir/corpus-$what
    mkdir -p "$corpus"
    "seed_$what" "$corpus" "$dir/$name"
    log=$dir/$name.log
    echo "fuzz $name: $(ls "$corpus" | wc -l) inputs in its corpus, $each s"
    (cd "$dir" && "./$name" -max_total_time="$each" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -timeout=10 -print_final_stats=1 "corpus-$what" >"$log" 2>&1) || status=1
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ "$status" -ne 0 ]; then
        tail -40 "$log"
        echo "fuzz $name: FINDING after ${runs:-?} inputs (log $log)"
        exit 1
    fi
    echo "fuzz $name: ${runs:-?} inputs in $each s, no finding"
done
cd "$root"
