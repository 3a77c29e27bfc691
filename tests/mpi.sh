#!/usr/bin/env bash
# Data-parallel training under mpirun (docs/distributed.md): 2 ranks x batch 4 give the
# parameters of one process with --accumulate 2 x batch 4, bit for bit (param_checksum),
# with and without --shard-optimizer, for ResNet-18 (SGD) and a reduced GPT-2 (AdamW)
# under none, approx-mc and hybrid at --budget min, the reduction's buckets started
# during the backward; the same with 64 KB buckets (hundreds) and with the reduction
# after the backward; every rank measures its planned peak and holds rank 0's
# parameters, and plan --ranks counts train's resident bytes. Faults: a rank whose --data is missing, and a rank
# killed mid-run, stop every rank within 30 s with a message naming the rank.
# Prints "ok/FAIL/skip name" lines and "RESULT passed failed skipped".
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! command -v mpirun >/dev/null 2>&1; then
    skip "mpi" "no mpirun (Open MPI: openmpi-bin)"; echo "RESULT $passed $failed $skipped"; exit 0
fi
# Open MPI refuses root unless told; its leaks are not ours under AddressSanitizer
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN="mpirun -np 2 --oversubscribe"

# json_get FILE EXPR: evaluates a Python expression on the parsed JSON `j`.
json_get() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# summary FILE: checksum, then whether every rank measured its planned peak and agrees
summary() {
    json_get "$1" "'%s %s %s' % (j['param_checksum'], j['rank_planned_peak_bytes'] == j['rank_measured_peak_bytes'] and j['planned_peak_bytes'] == j['measured_peak_bytes'], len(set(j['rank_param_checksums'])) == 1 and j['rank_param_checksums'][0] == j['param_checksum'])" 2>/dev/null
}

# same NAME ARGS...: one process --accumulate 2, 2 ranks, 2 ranks sharded
same() {
    local name=$1; shift
    if ! timeout 300 $REMAT train "$@" --accumulate 2 --json >"$tmp/one.json" 2>"$tmp/err"; then
        fail "$name" "one process: $(tail -3 "$tmp/err")"; return
    fi
    if ! timeout 300 $MPIRUN $REMAT train "$@" --json >"$tmp/two.json" 2>"$tmp/err"; then
        fail "$name" "2 ranks: $(tail -3 "$tmp/err")"; return
    fi
    if ! timeout 300 $MPIRUN $REMAT train "$@" --shard-optimizer --json >"$tmp/sh.json" 2>"$tmp/err"; then
        fail "$name" "2 ranks sharded: $(tail -3 "$tmp/err")"; return
    fi
    local a b s ra rs
    a=$(summary "$tmp/one.json"); b=$(summary "$tmp/two.json"); s=$(summary "$tmp/sh.json")
    ra=$(json_get "$tmp/two.json" "j['resident_bytes']"); rs=$(json_get "$tmp/sh.json" "j['resident_bytes']")
    # sharding keeps half of the optimizer's state per rank: (momentum: 1, AdamW: 2)
    # floats per parameter, the parameters padded to two equal shards
    local half
    half=$(json_get "$tmp/sh.json" "(1 if j['optimizer'] == 'sgd' else 2) * 4 * ((j['params'] + 1) // 2)")
    if [ "${a%% *}" = "${b%% *}" ] && [ "${a%% *}" = "${s%% *}" ] &&
       [ "${b#* }" = "True True" ] && [ "${s#* }" = "True True" ] && [ "$((ra - rs))" = "$half" ]; then
        ok "$name (${a%% *}; resident per rank $ra, sharded $rs)"
    else
        fail "$name" "one process: $a; 2 ranks: $b; sharded: $s (resident $ra, $rs; expected a difference of $half)"
    fi
}

R18="resnet18 --input-size 64x64 --batch 4 --steps 5 --backend cpu --threads 1"
GPT="gpt2 --layers 2 --width 64 --heads 4 --seq-len 32 --vocab 256 --batch 4 --steps 5 --optimizer adamw --backend cpu --threads 1"
for s in "none" "approx-mc --budget min" "hybrid --budget min"; do
    same "resnet18 sgd $s" $R18 --strategy $s
    same "gpt2 adamw $s" $GPT --strategy $s
done

# many buckets (64 KB: hundreds; BUCKET, BUCKET_FLOATS: another size), started during the
# backward or after it: the same bits as one process --accumulate 2, and plan --ranks 2
# --bucket counts train's resident bytes
BUCKET=64KB BUCKET_FLOATS=16384
buckets() {
    local name=$1; shift
    local plan=() skip=0 x
    for x in "$@"; do # plan takes the model's options, not --steps
        if [ "$x" = "--steps" ]; then skip=1; elif [ "$skip" = 1 ]; then skip=0; else plan+=("$x"); fi
    done
    timeout 300 $REMAT train "$@" --accumulate 2 --json >"$tmp/one.json" 2>"$tmp/err" &&
    timeout 300 $MPIRUN $REMAT train "$@" --bucket $BUCKET --json >"$tmp/two.json" 2>>"$tmp/err" &&
    timeout 300 $MPIRUN $REMAT train "$@" --bucket $BUCKET --reduce-after --json >"$tmp/after.json" 2>>"$tmp/err" &&
    timeout 300 $REMAT plan "${plan[@]}" --ranks 2 --bucket $BUCKET --json >"$tmp/plan.json" 2>>"$tmp/err" ||
        { fail "$name" "$(tail -3 "$tmp/err")"; return; }
    local a b c nb pr tr
    a=$(summary "$tmp/one.json"); b=$(summary "$tmp/two.json"); c=$(summary "$tmp/after.json")
    nb=$(json_get "$tmp/two.json" "j['reduce_buckets']")
    pr=$(json_get "$tmp/plan.json" "j['resident_bytes']"); tr=$(json_get "$tmp/two.json" "j['resident_bytes']")
    # at least the parameters over BUCKET_FLOATS (64 KB: 16,384 floats) buckets
    local least
    least=$(json_get "$tmp/two.json" "j['params'] // $BUCKET_FLOATS")
    if [ "${a%% *}" = "${b%% *}" ] && [ "${a%% *}" = "${c%% *}" ] && [ "${b#* }" = "True True" ] &&
       [ "${c#* }" = "True True" ] && [ "$nb" -ge "$least" ] && [ "$pr" = "$tr" ]; then
        ok "$name (${a%% *}; $nb buckets; resident $tr as planned)"
    else
        fail "$name" "one process: $a; 2 ranks: $b; after the backward: $c; $nb buckets (at least $least); plan $pr, train $tr"
    fi
}
buckets "resnet18 64 KB buckets" $R18 --strategy approx-mc --budget min
# An exported GPT whose fused q/k/v projection is read as three row blocks of one
# parameter (docs/onnx.md): the buckets follow the block's order, where those blocks sit
# together at the first's place; 4 KB buckets (dozens) cut through them
if "$PY" - "$tmp/gpt.onnx" <<'PYEOF' >/dev/null 2>&1
import sys, torch
sys.path.insert(0, "tools")
import onnx_tf_reference as R
torch.onnx.export(R.GPT().train(), torch.randint(0, 64, (2, 16)), sys.argv[1], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
PYEOF
then
    BUCKET=4KB BUCKET_FLOATS=1024 buckets "exported GPT 4 KB buckets" "$tmp/gpt.onnx" \
        --batch 2 --steps 3 --optimizer adamw --backend cpu --threads 1 --strategy approx-mc --budget min
else
    skip "exported GPT 4 KB buckets" "no PyTorch for python3"
fi

# --data: rank r reads micro-batch r of each step, as the one process does
"$PY" - "$tmp" <<'PYEOF'
import struct, sys, random
random.seed(5)
n, c, h, w = 24, 3, 32, 32
with open(sys.argv[1] + "/d0.bin", "wb") as f:
    f.write(b"REMATDAT" + struct.pack("<4q", n, c, h, w))
    f.write(struct.pack("<%df" % (n * c * h * w), *[random.uniform(-1, 1) for _ in range(n * c * h * w)]))
    f.write(struct.pack("<%di" % n, *[random.randrange(10) for _ in range(n)]))
PYEOF
SMALL="resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 3 --backend cpu --threads 1"
same "resnet18 --data" $SMALL --data "$tmp/d0.bin"

# What the system measures under mpirun: from the trainer's mark the data grew by the
# blocks alone, so within the budget (Open MPI's shared-memory transport touches the
# pages of its fragments on first use; dist_begin's traffic does that before any
# trainer: 12 KB beside the blocks on two ranks without it). Not under the sanitizers,
# whose allocator and shadow grow beside the blocks.
case "$BUILD" in
*san*) skip "os data under mpirun" "the sanitizers' allocator and shadow memory" ;;
*)
    if timeout 300 $MPIRUN $REMAT train $SMALL --strategy approx-mc --budget min --json \
        >"$tmp/os.json" 2>"$tmp/err"; then
        grew=$(json_get "$tmp/os.json" "j['os_rss_data_growth_bytes']")
        blocks=$(json_get "$tmp/os.json" "j['os_rss_blocks_bytes']")
        if [ "$grew" = "$blocks" ]; then
            ok "os data under mpirun (+$grew bytes: the blocks)"
        else
            fail "os data under mpirun" "data +$grew bytes, the blocks +$blocks"
        fi
    else
        fail "os data under mpirun" "$(tail -3 "$tmp/err")"
    fi ;;
esac

# fault NAME CMD...: exits non-zero within 30 s (timeout's 124: a hang), naming rank 1
fault() {
    local name=$1; shift
    local t0=$SECONDS rc
    timeout 30 "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        fail "$name" "exit $rc after $((SECONDS - t0)) s: $(tail -5 "$tmp/err")"; return
    fi
    if ! grep -q "rank 1" "$tmp/err"; then fail "$name" "no message names rank 1: $(tail -5 "$tmp/err")"; return; fi
    ok "$name (exit $rc after $((SECONDS - t0)) s)"
}
# rank 1's --data does not exist: both ranks say that rank 1 failed
fault "missing data on rank 1" $MPIRUN sh -c 'exec "$0" train '"$SMALL"' --data "$1/d$OMPI_COMM_WORLD_RANK.bin"' \
    "$REMAT" "$tmp"
if [ "$(grep -c 'rank 1 of 2 failed setting up' "$tmp/err")" -ne 2 ]; then
    fail "missing data: both ranks" "$(cat "$tmp/err")"
else ok "missing data: both ranks name rank 1"; fi
# rank 1 killed after 3 s of a long run
fault "rank 1 killed" $MPIRUN sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep 3; kill -9 $$) & fi; exec "$0" train '"$SMALL"' --steps 100000' "$REMAT"

echo "RESULT $passed $failed $skipped"
