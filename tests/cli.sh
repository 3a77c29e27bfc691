#!/usr/bin/env bash
# CLI tests: help on every command, clear errors with non-zero exits on bad input, the
# zoo's parameter counts, the graph-dump figures, the header example and make install.
# Prints "ok/FAIL/skip name" lines and "RESULT passed failed skipped".
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# expect_error NAME PATTERN CMD...: exit code RC (default 1: bad input; docs/cli.md),
# nothing on stdout, one "remat:" line on stderr matching PATTERN, no source location
# ("[file.c:12]"); then again with --json after the subcommand: the same exit code and
# stderr, and on stdout one JSON object whose "error" matches PATTERN (only "error" and
# "hint" keys). NOJSON=1 skips the second run (main.c's own errors).
expect_error() {
    local name=$1 pat=$2 want=${RC:-1}; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    if [ "$rc" -ge 128 ]; then fail "$name" "crashed (exit $rc)"; return; fi
    if [ "$rc" -ne "$want" ]; then fail "$name" "exit $rc, expected $want: $(cat "$tmp/err")"; return; fi
    if [ -s "$tmp/out" ]; then fail "$name" "printed on stdout"; return; fi
    if [ "$(grep -c '^remat: ' "$tmp/err")" -ne 1 ]; then fail "$name" "stderr: $(cat "$tmp/err")"; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then fail "$name" "stderr lacks '$pat': $(cat "$tmp/err")"; return; fi
    if grep -q '\[[a-z_]*\.c:[0-9]*\]' "$tmp/err"; then fail "$name" "a source location: $(cat "$tmp/err")"; return; fi
    if [ -n "${NOJSON:-}" ]; then ok "$name"; return; fi
    "$1" "$2" --json "${@:3}" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then fail "$name --json" "exit $rc, expected $want"; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then fail "$name --json" "stderr lacks '$pat': $(cat "$tmp/err")"; return; fi
    local e
    if ! e=$("$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); assert isinstance(j, dict) and isinstance(j['error'], str) and set(j) <= {'error','hint'}; print(j['error'])" "$tmp/out" 2>/dev/null); then
        fail "$name --json" "stdout is not {\"error\": ...}: $(head -c 300 "$tmp/out")"; return
    fi
    if ! grep -q -- "$pat" <<<"$e"; then fail "$name --json" "error lacks '$pat': $e"; return; fi
    ok "$name"
}

# json_get FILE EXPR: evaluates a Python expression on the parsed JSON `j`.
json_get() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# --help everywhere
for c in "" zoo plan compare train depth; do
    if $REMAT $c --help >"$tmp/out" 2>&1 && grep -q "usage: remat" "$tmp/out"; then ok "help $c"
    else fail "help $c" "$(head -3 "$tmp/out")"; fi
done

RC=2 expect_error "unknown command" "unknown command 'fly'" $REMAT fly
expect_error "unknown model" "nosuchnet" $REMAT plan nosuchnet
expect_error "bad batch" "'abc' is not a whole number" $REMAT plan resnet18 --batch abc
expect_error "zero batch" "'0' is not a whole number from 1" $REMAT plan resnet18 --batch 0
expect_error "missing value" "option --batch needs a value" $REMAT plan resnet18 --batch
expect_error "bad size" "is not a size HxW" $REMAT plan resnet18 --input-size 224
expect_error "unknown option" "unknown option '--frobnicate'" $REMAT plan resnet18 --frobnicate
expect_error "unknown strategy" "unknown strategy 'magic'" $REMAT plan resnet18 --strategy magic
expect_error "missing file" "no such file" $REMAT plan /nonexistent/cg_x.txt
expect_error "no model" "no model given" $REMAT plan
expect_error "two models" "more than one model" $REMAT plan resnet18 vgg16
expect_error "bad cost" "unknown cost model" $REMAT plan resnet18 --cost seconds
expect_error "too small" "unet" $REMAT plan unet --input-size 100x100
printf '3 2\n0 4 _\n' >"$tmp/bad.txt"
expect_error "malformed dump" "bad.txt:3:" $REMAT plan "$tmp/bad.txt"
head -c 300 /dev/urandom >"$tmp/noise.txt"
expect_error "binary dump" "noise.txt" $REMAT plan "$tmp/noise.txt"
expect_error "zoo argument" "unknown argument" $REMAT zoo --nope
expect_error "lattice strategy" "applies to exact-tc and exact-mc" $REMAT plan resnet18 --authors-lattice
expect_error "bad coarse pairs" "'x' is neither a number of pairs (1 or more) nor 'never'" $REMAT plan resnet18 --coarse-pairs x
# The DP's pairs from coarse to fine (docs/planners.md): by default not on a graph this
# small (the same plan as every pair), forced (--coarse-pairs 1) a plan within the
# budget, whose chain differs here (GPT-2 of 48 layers a tenth of the way from approx-tc's
# least budget to none's peak).
cp_json() { $REMAT plan gpt2 --layers 48 --batch 1 --strategy approx-tc --budget 5831174412 --json "$@" 2>&1 | sed -E 's/"plan_seconds":[^,}]*//'; }
cp_def=$(cp_json); cp_never=$(cp_json --coarse-pairs never); cp_one=$(cp_json --coarse-pairs 1)
if [ -n "$cp_def" ] && [ "$cp_def" = "$cp_never" ] && [ "$cp_one" != "$cp_def" ] &&
   echo "$cp_one" | grep -q '"feasible":true' &&
   [ "$(echo "$cp_one" | sed -n 's/.*"total_peak_bytes":\([0-9]*\).*/\1/p')" -le 5831174412 ]; then
    ok "plan --coarse-pairs"
else fail "plan --coarse-pairs" "default/never/1 differ as they should not: $(echo "$cp_one" | head -c 300)"; fi
# --dp-within: past 1,000 planned values the time-centric DP takes the beam's chain where
# it is proven within 0.1% of the least over its lower sets (that guarantee: test_dp_scale's
# test_within), and says so; exact, or a graph of fewer values, the least. GPT-2 of 200
# layers (4,609 values) a tenth of the way from approx-tc's least budget to none's peak,
# where the search reaches the beam; both plans fit the budget.
expect_error "bad dp within" "'1.5' is neither a fraction between 0 and 1 nor 'exact'" $REMAT plan resnet18 --dp-within 1.5
expect_error "dp within text" "'x' is neither a fraction" $REMAT plan resnet18 --dp-within x
dw_json() { $REMAT plan gpt2 --layers 200 --batch 1 --strategy approx-tc --budget 21153908185 --json "$@" 2>&1; }
dw_def=$(dw_json); dw_exact=$(dw_json --dp-within exact); dw_w=$(dw_json --dp-within 0.01)
w_small=$($REMAT plan resnet18 --batch 2 --input-size 64x64 --strategy approx-tc --budget min --json | sed -n 's/.*"dp_within":\([^,}]*\).*/\1/p')
peak_of() { echo "$1" | sed -n 's/.*"total_peak_bytes":\([0-9]*\).*/\1/p'; }
within_of() { echo "$1" | sed -n 's/.*"dp_within":\([^,}]*\).*/\1/p'; }
if [ "$(within_of "$dw_def")" = 0.001 ] && [ "$(within_of "$dw_exact")" = 0 ] &&
   [ "$(within_of "$dw_w")" = 0.01 ] && [ "$w_small" = 0 ] &&
   [ "$(peak_of "$dw_exact")" -le 21153908185 ] && [ "$(peak_of "$dw_def")" -le 21153908185 ]; then
    ok "plan --dp-within"
else fail "plan --dp-within" "default $(within_of "$dw_def"), exact $(within_of "$dw_exact"), 0.01 $(within_of "$dw_w"), resnet18 $w_small"; fi

# --authors-lattice: fewer lower sets, never a smaller minimum budget
if $REMAT plan resnet18 --batch 2 --input-size 64x64 --strategy exact-mc --budget min --json >"$tmp/e1.json" &&
   $REMAT plan resnet18 --batch 2 --input-size 64x64 --strategy exact-mc --budget min --authors-lattice --json >"$tmp/e2.json"; then
    a=$(json_get "$tmp/e1.json" "'%d %d' % (j['n_lower_sets'], j['activation_budget_bytes'])")
    b=$(json_get "$tmp/e2.json" "'%d %d' % (j['n_lower_sets'], j['activation_budget_bytes'])")
    set -- $a $b
    if [ "$3" -lt "$1" ] && [ "$4" -ge "$2" ]; then ok "authors lattice"
    else fail "authors lattice" "full: $a, authors': $b"; fi
else
    fail "authors lattice" "remat plan failed"
fi

# zoo --json: torchvision's parameter counts
if $REMAT zoo --json >"$tmp/zoo.json"; then
    got=$(json_get "$tmp/zoo.json" "' '.join('%s=%d' % (m['name'], m['params']) for m in j if m['name'] in ('resnet18','resnet50','resnet152','vgg16','vgg19','densenet121','densenet161','googlenet'))")
    want="resnet18=11689512 resnet50=25557032 resnet152=60192808 vgg16=138357544 vgg19=143667240 densenet121=7978856 densenet161=28681000 googlenet=13004888"
    if [ "$got" = "$want" ]; then ok "zoo params"; else fail "zoo params" "$got"; fi
    keys=$(json_get "$tmp/zoo.json" "all(sorted(m) == ['gflops','n_ops','name','params'] and m['n_ops'] > 0 and m['gflops'] > 0 for m in j)")
    [ "$keys" = True ] && ok "zoo keys" || fail "zoo keys" "$keys"
else
    fail "zoo params" "remat zoo --json failed"
fi
if $REMAT plan googlenet --no-aux --json >"$tmp/g.json" &&
   [ "$(json_get "$tmp/g.json" "j['params']")" = 6624904 ]; then ok "googlenet without aux"
else fail "googlenet without aux" "$(cat "$tmp/g.json")"; fi

# transformers: their options, refused where they do not apply; the rules as strategies
expect_error "heads not dividing the width" "not a multiple of the 5 heads" $REMAT plan gpt2 --heads 5
expect_error "sequence past the positions" "position table has 512" $REMAT plan bert-base --seq-len 600
expect_error "layers on a CNN" "applies to transformers only" $REMAT plan resnet18 --layers 2
expect_error "image size on gpt2" "do not apply to a transformer" $REMAT plan gpt2 --input-size 32x32
expect_error "bad dropout" "is not a dropout probability" $REMAT plan gpt2 --dropout 1.5
expect_error "bad optimizer" "unknown optimizer 'adam'" $REMAT plan gpt2 --optimizer adam
expect_error "selective without attention" "no attention" $REMAT plan resnet18 --strategy selective
if $REMAT plan gpt2 --layers 2 --width 64 --heads 4 --seq-len 32 --vocab 100 --json >"$tmp/t.json" &&
   [ "$(json_get "$tmp/t.json" "j['params']")" = $((100*64 + 1024*64 + 2*(12*64*64 + 13*64) + 2*64)) ]; then
    ok "gpt2 options"
else fail "gpt2 options" "$(cat "$tmp/t.json")"; fi
r1=$($REMAT plan gpt2 --layers 2 --width 64 --heads 4 --seq-len 32 --vocab 100 --json | json_get /dev/stdin "j['resident_bytes']")
r2=$($REMAT plan gpt2 --layers 2 --width 64 --heads 4 --seq-len 32 --vocab 100 --optimizer adamw --json | json_get /dev/stdin "j['resident_bytes']")
p=$(json_get "$tmp/t.json" "j['params']")
[ "$((r2 - r1))" = "$((4 * p))" ] && ok "adamw state resident" || fail "adamw state resident" "$r1 -> $r2 for $p parameters"
for s in blocks selective; do
    o=$($REMAT plan gpt2 --layers 2 --width 64 --heads 4 --seq-len 32 --vocab 100 --strategy $s --json | json_get /dev/stdin "j['activation_peak_bytes'] < $(json_get "$tmp/t.json" "j['activation_peak_bytes']") and j['n_recomputed'] > 0")
    [ "$o" = True ] && ok "strategy $s" || fail "strategy $s" "$o"
done

# AdamW: its options' errors, and its state in the resident bytes (4 more per parameter; mlp 669,706)
expect_error "momentum with adamw" "--momentum is SGD's option" $REMAT train mlp --optimizer adamw --momentum 0.9
expect_error "beta1 with sgd" "--beta1 is AdamW's option" $REMAT train mlp --beta1 0.8
expect_error "beta2 of 1" "are in (0, 1)" $REMAT train mlp --optimizer adamw --beta2 1
expect_error "eps of 0" "--eps is above 0" $REMAT train mlp --optimizer adamw --eps 0
expect_error "unknown optimizer" "unknown optimizer 'nadam'" $REMAT train mlp --optimizer nadam
if $REMAT train mlp --steps 2 --json >"$tmp/sgd.json" 2>/dev/null &&
   $REMAT train mlp --steps 2 --json --optimizer adamw >"$tmp/adamw.json" 2>/dev/null &&
   [ "$(json_get "$tmp/adamw.json" "j['resident_bytes']")" = \
     "$(json_get "$tmp/sgd.json" "j['resident_bytes'] + 4 * 669706")" ] &&
   [ "$(json_get "$tmp/adamw.json" "j['optimizer']")" = adamw ] &&
   [ "$(json_get "$tmp/adamw.json" "j['loss'][1] != j['loss'][0]")" = True ]
then ok "train adamw"; else fail "train adamw" "$(head -c 300 "$tmp/adamw.json")"; fi

# plan counts what a data-parallel or accumulating process keeps resident, as train does
r18="resnet18 --input-size 32x32 --batch 2 --classes 10"
pa=$($REMAT plan $r18 --accumulate 2 --json | json_get /dev/stdin "j['resident_bytes']")
ta=$($REMAT train $r18 --accumulate 2 --steps 1 --json 2>/dev/null | json_get /dev/stdin "j['resident_bytes']")
[ -n "$pa" ] && [ "$pa" = "$ta" ] && ok "plan --accumulate as train" || fail "plan --accumulate as train" "plan $pa, train $ta"
p2=$($REMAT plan $r18 --ranks 2 --json | json_get /dev/stdin "j['resident_bytes']")
ps=$($REMAT plan $r18 --ranks 2 --shard-optimizer --json | json_get /dev/stdin "j['resident_bytes'] + 4 * ((j['params'] + 1) // 2)")
[ -n "$p2" ] && [ "$p2" = "$ps" ] && ok "plan --shard-optimizer halves the momentum" || fail "plan --shard-optimizer halves the momentum" "$p2 against $ps"

# a language model trained on text read as bytes: the same losses from the same seed,
# others from another; a vocabulary too small for bytes and an image data file refused
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 40) >"$tmp/text.txt"
lm="gpt2 --layers 1 --width 16 --heads 2 --seq-len 16 --vocab 256 --batch 2 --steps 3 --json"
if $REMAT train $lm --data "$tmp/text.txt" >"$tmp/lm1.json" 2>/dev/null &&
   $REMAT train $lm --data "$tmp/text.txt" >"$tmp/lm2.json" 2>/dev/null &&
   $REMAT train $lm --data "$tmp/text.txt" --seed 7 >"$tmp/lm3.json" 2>/dev/null &&
   [ "$(json_get "$tmp/lm1.json" "j['loss']")" = "$(json_get "$tmp/lm2.json" "j['loss']")" ] &&
   [ "$(json_get "$tmp/lm3.json" "j['loss']")" != "$(json_get "$tmp/lm1.json" "j['loss']")" ] &&
   [ "$(json_get "$tmp/lm1.json" "all(4.5 < x < 7 for x in j['loss'])")" = True ]; then
    ok "train text as bytes"
else fail "train text as bytes" "$(head -c 300 "$tmp/lm1.json")"; fi
# a language model's steps count tokens: 2 sequences of 16 a step over the step's time
if $REMAT train gpt2 --layers 1 --width 16 --heads 2 --seq-len 16 --vocab 64 --batch 2 --steps 1 --json >"$tmp/tps.json" 2>"$tmp/tps.txt" &&
   "$PY" -c "
import json, re, sys
j = json.load(open(sys.argv[1])); t = open(sys.argv[2]).read()
m = re.search(r'step 1/1  loss \S+  \S+ s  (\S+) tokens/s', t)
assert m and abs(float(m.group(1)) - 32 / j['step_seconds'][0]) <= 0.05 + 1e-3 * float(m.group(1))
" "$tmp/tps.json" "$tmp/tps.txt"
then ok "train counts tokens"; else fail "train counts tokens" "$(head -c 300 "$tmp/tps.txt")"; fi
expect_error "text on a small vocabulary" "vocabulary" $REMAT train gpt2 --layers 1 --width 16 --heads 2 --seq-len 16 --vocab 100 --data "$tmp/text.txt"

# plan --json on a zoo model: the keys, and peaks that order sensibly
if $REMAT plan resnet50 --batch 32 --json --schedule "$tmp/s.json" >"$tmp/p.json"; then
    r=$(json_get "$tmp/p.json" "all(k in j for k in ('model','batch','strategy','params','resident_bytes','naive_bytes','activation_peak_bytes','lower_bound_bytes','forward_flops','n_values')) and j['batch'] == 32 and j['lower_bound_bytes'] <= j['activation_peak_bytes'] < j['naive_bytes']")
    [ "$r" = True ] && ok "plan json" || fail "plan json" "$(cat "$tmp/p.json")"
    n=$(json_get "$tmp/s.json" "len(j['steps'])")
    [ "$n" = "$(json_get "$tmp/p.json" "j['n_steps']")" ] && ok "schedule file" || fail "schedule file" "$n steps"
    # The header's example plans the same model: it must print the same peak.
    if [ -x "$BUILD/example" ]; then
        ex=$("$BUILD/example")
        peak=$(json_get "$tmp/p.json" "j['activation_peak_bytes']")
        case "$ex" in "activation peak $peak bytes"*) ok "header example" ;;
            *) fail "header example" "$ex (plan says $peak)" ;; esac
    else
        fail "header example" "$BUILD/example was not built"
    fi
else
    fail "plan json" "remat plan failed"
fi

# the authors' graph dump
graphs=${REMAT_GRAPHS:-../shared/graphs/kusumoto}
if [ -f "$graphs/cg_resnet50.txt" ]; then
    $REMAT plan "$graphs/cg_resnet50.txt" --json >"$tmp/d.json"
    r=$(json_get "$tmp/d.json" "(j['naive_bytes'], j['naive_all_bytes'], j['activation_peak_bytes'], j['n_values'])")
    [ "$r" = "(9211209736, 9454201928, 3478451200, 176)" ] && ok "dump resnet50" || fail "dump resnet50" "$r"
    expect_error "batch on dump" "do not apply to a graph dump" $REMAT plan "$graphs/cg_resnet50.txt" --batch 8
    expect_error "flops on dump" "no shapes" $REMAT plan "$graphs/cg_resnet50.txt" --cost flops
else
    skip "dump resnet50" "$graphs is absent"
fi

# ONNX: plan and train tests/data/tiny.onnx (459 parameters), clear errors on bad files
if $REMAT plan tests/data/tiny.onnx --json >"$tmp/o.json" &&
   [ "$(json_get "$tmp/o.json" "j['params']")" = 459 ]; then ok "plan onnx"
else fail "plan onnx" "$(head -c 300 "$tmp/o.json")"; fi
if $REMAT train tests/data/tiny.onnx --strategy approx-mc --budget min --steps 2 --backend cpu --json >"$tmp/ot.json" 2>/dev/null &&
   [ "$(json_get "$tmp/ot.json" "j['planned_peak_bytes'] == j['measured_peak_bytes'] and len(j['loss']) == 2")" = True ]; then ok "train onnx"
else fail "train onnx" "$(head -c 300 "$tmp/ot.json")"; fi
head -c 1000 tests/data/tiny.onnx >"$tmp/cut.onnx"
expect_error "truncated onnx" "cut.onnx" $REMAT plan "$tmp/cut.onnx"
expect_error "onnx input size" "does not apply to an ONNX file" $REMAT plan tests/data/tiny.onnx --input-size 8x8
expect_error "unknown loss" "unknown loss 'hinge'" $REMAT train tests/data/tiny.onnx --loss hinge
expect_error "missing onnx" "no such file" $REMAT plan /nonexistent/model.onnx

# errors made for scripts and people (docs/cli.md): empty files, directories, options
# that do not apply, strategies that need a budget, exit codes, no source locations
: >"$tmp/empty.onnx"; : >"$tmp/empty.txt"; : >"$tmp/empty.bin"; mkdir -p "$tmp/dir.onnx"
expect_error "empty onnx" "empty.onnx: empty file" $REMAT plan "$tmp/empty.onnx"
expect_error "empty dump" "empty.txt: empty file" $REMAT plan "$tmp/empty.txt"
expect_error "directory onnx" "dir.onnx: is a directory" $REMAT plan "$tmp/dir.onnx"
expect_error "directory data" "dir.onnx: is a directory" $REMAT train resnet18 --input-size 32x32 --batch 2 --data "$tmp/dir.onnx"
expect_error "empty data" "empty.bin: empty file" $REMAT train resnet18 --input-size 32x32 --batch 2 --data "$tmp/empty.bin"
expect_error "empty params" "empty.bin: empty file" $REMAT train resnet18 --input-size 32x32 --batch 2 --load "$tmp/empty.bin"
expect_error "directory params" "is a directory" $REMAT train resnet18 --input-size 32x32 --batch 2 --load "$tmp/dir.onnx"
expect_error "classes on onnx" "--classes does not apply to an ONNX file" $REMAT plan tests/data/tiny.onnx --classes 5
# Every op type remat does not read, in one refusal: each with its count and first node
if "$PY" - "$tmp/gaps.onnx" <<'PYEOF' 2>/dev/null
import sys
from onnx import helper, TensorProto
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [2, 3])
nodes = [helper.make_node('Relu', ['x'], ['a'], name='relu0'),
         helper.make_node('Erf', ['a'], ['b'], name='erf0'),
         helper.make_node('Softsign', ['b'], ['c'], name='softsign0'),
         helper.make_node('Erf', ['c'], ['d'], name='erf1'),
         helper.make_node('Foo', ['d'], ['e'], name='foo0', domain='com.example'),
         helper.make_node('Erf', ['e'], ['y'], name='erf2')]
g = helper.make_graph(nodes, 'gaps', [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13), helper.make_opsetid('com.example', 1)])
open(sys.argv[1], 'wb').write(m.SerializeToString())
PYEOF
then
    # (Erf is read where it makes a GELU, so only the two others are listed)
    expect_error "every unsupported op at once" "gaps.onnx: 2 op types remat does not read at opset 13, in 2 nodes (docs/onnx.md lists those it reads): Softsign x1 (first: node 2 'softsign0'), com.example:Foo x1 (first: node 4 'foo0')" $REMAT plan "$tmp/gaps.onnx"
else
    skip "every unsupported op at once" "python3-onnx cannot write a model"
fi
expect_error "no-aux on onnx" "--no-aux does not apply to an ONNX file" $REMAT train tests/data/tiny.onnx --no-aux
expect_error "loss is train's" "unknown option '--loss'" $REMAT plan resnet18 --loss softmax-ce
for s in approx-tc approx-mc exact-tc exact-mc optimal hybrid; do
    expect_error "$s needs a budget" "$s plans for a memory budget, and none was given" $REMAT plan resnet18 --strategy $s
done
expect_error "train needs a budget" "train: approx-mc plans for a memory budget" $REMAT train resnet18 --strategy approx-mc
expect_error "train's time limit" "--time-limit: '0' is not a whole number from 1 to 86400" $REMAT train mlp --strategy optimal --budget min --time-limit 0
# train --strategy optimal honours --time-limit: ResNet-18 at its least budget (a MILP
# that runs to its limit: the default, 60 s per attempt, takes minutes) planned and
# trained with the planned peak measured, well within a minute with a 2 s limit
t0=$SECONDS
if out=$(timeout 60 $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 1 --strategy optimal --budget min --time-limit 2 --json 2>"$tmp/err") &&
   [ "$(echo "$out" | "$PY" -c "import json,sys; j=json.load(sys.stdin); print(j['planned_peak_bytes'] == j['measured_peak_bytes'] and j['strategy'] == 'optimal')")" = True ]; then
    ok "train optimal --time-limit 2 ($((SECONDS - t0)) s)"
else fail "train optimal --time-limit 2" "$(tail -3 "$tmp/err") $(echo "$out" | head -c 300)"; fi
if $REMAT plan resnet18 --batch 2 --input-size 64x64 --strategy chen-greedy --json >"$tmp/cg.json" 2>/dev/null &&
   [ "$(json_get "$tmp/cg.json" "j['feasible'] and j['budget_bytes'] is None")" = True ]; then ok "chen-greedy without a budget: its least peak"
else fail "chen-greedy without a budget" "$(head -c 300 "$tmp/cg.json")"; fi
# compare and plan agree on every strategy's feasibility at one budget (one that some
# strategies meet and others do not), and on the least budget a refusal names (optimal
# apart: its MILP takes a minute here)
agree_s="none approx-tc approx-mc exact-tc exact-mc chen-sqrtn chen-greedy superneurons hybrid"
if $REMAT compare resnet18 --budget 155000000 --strategies "${agree_s// /,}" --json >"$tmp/agree.json" 2>/dev/null; then
    agree=1; n_yes=0; n_no=0
    for s in $agree_s; do
        want=$(json_get "$tmp/agree.json" "[x['feasible'] for x in j if x['strategy'] == '$s'][0]")
        if $REMAT plan resnet18 --strategy "$s" --budget 155000000 >/dev/null 2>"$tmp/agree.err"; then got=True
        else got=False; fi
        [ "$got" = True ] && n_yes=$((n_yes + 1)) || n_no=$((n_no + 1))
        if [ "$want" != "$got" ]; then agree=0; echo "  $s: compare says $want, plan says $got"; fi
        if [ "$got" = False ] && ! grep -qF "$(json_get "$tmp/agree.json" "[x['error'] for x in j if x['strategy'] == '$s'][0]")" "$tmp/agree.err"; then
            agree=0; echo "  $s: compare's error is not plan's: $(cat "$tmp/agree.err")"; fi
    done
    if [ "$agree" = 1 ] && [ "$n_yes" -gt 0 ] && [ "$n_no" -gt 0 ]; then ok "compare and plan agree on feasibility"
    else fail "compare and plan agree on feasibility" "$n_yes feasible, $n_no not"; fi
else fail "compare and plan agree on feasibility" "compare failed"; fi
RC=3 expect_error "unwritable schedule" "cannot write '/nonexistent-dir/s.json'" $REMAT plan resnet18 --schedule /nonexistent-dir/s.json
RC=3 expect_error "unwritable trace" "cannot write '/nonexistent-dir/t.json'" $REMAT plan resnet18 --trace /nonexistent-dir/t.json
"$PY" - "$tmp/huge.prm" <<'PYEOF'
import struct, sys
name = b'conv1.weight'
with open(sys.argv[1], 'wb') as f:   # dimensions whose product overflows int64
    f.write(b'REMATPRM' + struct.pack('<I', 1) + struct.pack('<I', len(name)) + name +
            struct.pack('<I', 4) + struct.pack('<4q', 1 << 40, 1 << 40, 1 << 40, 3))
PYEOF
expect_error "params dimensions overflow" "'conv1.weight' has a bad dimension" $REMAT train resnet18 --input-size 32x32 --batch 2 --load "$tmp/huge.prm"
if REMAT_DEBUG=1 $REMAT plan "$tmp/cut.onnx" 2>&1 | grep -q '\[onnx\.c:[0-9]*\]$' &&
   ! $REMAT plan "$tmp/cut.onnx" 2>&1 | grep -q '\[onnx\.c'; then ok "source locations with REMAT_DEBUG=1 only"
else fail "source locations with REMAT_DEBUG=1 only" "$(REMAT_DEBUG=1 $REMAT plan "$tmp/cut.onnx" 2>&1)"; fi
if $REMAT train --help | grep -q '^  --loss softmax-ce' && ! $REMAT plan --help | grep -q -- '--loss'; then ok "train --help lists --loss"
else fail "train --help lists --loss" "$($REMAT train --help | grep -- --loss)"; fi

# progress: a line on stderr on a terminal (script gives the command one), nothing when
# stderr is a file or with --json
if $REMAT compare resnet18 --batch 2 --input-size 64x64 --strategies chen-sqrtn >/dev/null 2>"$tmp/pe" && [ ! -s "$tmp/pe" ] &&
   $REMAT train resnet18 --batch 2 --input-size 32x32 --steps 2 >/dev/null 2>"$tmp/pe" && [ ! -s "$tmp/pe" ]; then
    ok "no progress off a terminal"
else fail "no progress off a terminal" "$(cat "$tmp/pe")"; fi
if command -v script >/dev/null; then
    script -qec "$REMAT train resnet18 --batch 2 --input-size 32x32 --steps 3 >/dev/null" /dev/null >"$tmp/tty" 2>&1
    script -qec "$REMAT train resnet18 --batch 2 --input-size 32x32 --steps 3 --json >/dev/null 2>&1 </dev/null; $REMAT compare resnet18 --batch 2 --input-size 64x64 --strategies chen-sqrtn --json >/dev/null" /dev/null >"$tmp/ttyj" 2>&1
    if grep -q "train resnet18: 0/3 steps" "$tmp/tty" && grep -q "elapsed" "$tmp/tty" && ! grep -q "elapsed" "$tmp/ttyj"; then
        ok "progress on a terminal, not with --json"
    else fail "progress on a terminal" "$(tr '\r' '\n' <"$tmp/tty" | head -5)"; fi
else
    skip "progress on a terminal" "no script(1)"
fi

# remat depth: the depth it finds fits (remat plan at that depth) and the next does not
if $REMAT depth --budget 400MB --batch 2 --input-size 64x64 --strategy none,chen-greedy --threads 2 --json >"$tmp/dp.json" 2>/dev/null; then
    r=$(json_get "$tmp/dp.json" "' '.join('%s:%d:%s' % (e['strategy'], e['depth'], e['verified']) for e in j)")
    set -- $r
    dn=$(echo "$1" | cut -d: -f2); dg=$(echo "$2" | cut -d: -f2)
    k=$(( (dn - 44) / 3 ))
    if [ "$(echo "$1" | cut -d: -f3)$(echo "$2" | cut -d: -f3)" = TrueTrue ] && [ "$dg" -ge "$dn" ] && [ "$dn" -ge 47 ] &&
       $REMAT plan resnet-3-8-$k-3 --batch 2 --input-size 64x64 --budget 400MB --backend cpu --threads 2 >/dev/null 2>&1 &&
       ! $REMAT plan resnet-3-8-$((k + 1))-3 --batch 2 --input-size 64x64 --budget 400MB --backend cpu --threads 2 >/dev/null 2>&1
    then ok "depth"; else fail "depth" "$r"; fi
else
    fail "depth" "remat depth failed"
fi
expect_error "depth without budget" "--budget is required" $REMAT depth
expect_error "depth min budget" "needs bytes" $REMAT depth --budget min

# remat train: planned equals measured, the same parameters under every plan, real data
if $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 2 --json >"$tmp/t0.json" 2>/dev/null &&
   $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 2 --strategy approx-mc --budget min --json >"$tmp/t1.json" 2>/dev/null; then
    r=$(json_get "$tmp/t1.json" "all(k in j for k in ('planned_peak_bytes','measured_peak_bytes','arena_bytes','loss','step_seconds','param_checksum')) and j['planned_peak_bytes'] == j['measured_peak_bytes'] == j['activation_peak_bytes'] + j['workspace_bytes'] and j['activation_peak_bytes'] <= j['arena_bytes'] and len(j['loss']) == 2")
    [ "$r" = True ] && ok "train json" || fail "train json" "$(cat "$tmp/t1.json")"
    [ "$(json_get "$tmp/t0.json" "j['param_checksum']")" = "$(json_get "$tmp/t1.json" "j['param_checksum']")" ] &&
        ok "train same bits" || fail "train same bits" "checksums differ"
else
    fail "train json" "remat train failed"
fi
"$PY" - "$tmp/d.bin" <<'PYEOF'
import random, struct, sys
random.seed(3)
n, c, h, w = 4, 3, 32, 32
with open(sys.argv[1], 'wb') as f:
    f.write(b'REMATDAT' + struct.pack('<4q', n, c, h, w))
    f.write(struct.pack('<%df' % (n * c * h * w), *[random.uniform(-1, 1) for _ in range(n * c * h * w)]))
    f.write(struct.pack('<%di' % n, *[random.randrange(10) for _ in range(n)]))
PYEOF
if $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 2 --data "$tmp/d.bin" --save "$tmp/p.prm" --json >"$tmp/t2.json" 2>/dev/null &&
   $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 1 --load "$tmp/p.prm" --json >/dev/null 2>&1 &&
   [ "$(json_get "$tmp/t2.json" "j['param_checksum']")" != "$(json_get "$tmp/t0.json" "j['param_checksum']")" ]; then
    ok "train with data, save and load"
else
    fail "train with data, save and load" "$(cat "$tmp/t2.json")"
fi
head -c 100 "$tmp/d.bin" >"$tmp/short.bin"
expect_error "truncated data" "not the file's size" $REMAT train resnet18 --input-size 32x32 --batch 2 --data "$tmp/short.bin"
expect_error "data shape" "takes 3x224x224" $REMAT train resnet18 --data "$tmp/d.bin"
expect_error "bad params file" "not a remat parameter file" $REMAT train resnet18 --input-size 32x32 --batch 2 --load "$tmp/d.bin"
expect_error "train a dump" "cannot open\\|no shapes\\|no such file" $REMAT train /nonexistent/cg.txt

# the host tier: hybrid at its least budget offloads, trains to none's parameters with the
# host tier in a file, and reports the time model
expect_error "zero bandwidth" "bandwidth must be above zero" $REMAT plan resnet18 --strategy hybrid --bandwidth 0
expect_error "bad flops" "is not a rate" $REMAT plan resnet18 --strategy hybrid --flops fast
if $REMAT plan resnet18 --batch 8 --strategy hybrid --budget min --json >"$tmp/h.json" 2>/dev/null &&
   [ "$(json_get "$tmp/h.json" "j['offloaded_values'] > 0 and j['host_peak_bytes'] > 0 and abs(j['total_seconds'] - j['compute_seconds'] - j['stall_seconds']) < 1e-9")" = True ] &&
   $REMAT plan resnet18 --batch 8 --strategy hybrid --budget min | grep -q "^host tier .* values offloaded"; then
    ok "plan with offload"
else
    fail "plan with offload" "$(cat "$tmp/h.json")"
fi
if $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 2 --json >"$tmp/n.json" 2>/dev/null &&
   $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 2 --strategy hybrid --budget min \
       --host-file "$tmp/host.bin" --json >"$tmp/o.json" 2>/dev/null &&
   [ "$(json_get "$tmp/n.json" "j['param_checksum']")" = "$(json_get "$tmp/o.json" "j['param_checksum']")" ] &&
   [ "$(json_get "$tmp/o.json" "j['measured_host_bytes'] == j['planned_host_bytes'] > 0 and j['transfer_bytes'] > 0")" = True ] &&
   [ -s "$tmp/host.bin" ]; then
    ok "train with offload"
else
    fail "train with offload" "$(cat "$tmp/o.json")"
fi
expect_error "host file" "/nonexistent-dir/h.bin" $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 1 --strategy hybrid --budget min --host-file /nonexistent-dir/h.bin

# the kernels: a cpu plan chooses each convolution's algorithm and counts its scratch; the
# schedule names them; forcing one; bad choices
if $REMAT plan resnet18 --batch 4 --input-size 64x64 --backend cpu --threads 2 --json --schedule "$tmp/k.json" >"$tmp/kp.json" &&
   $REMAT plan resnet18 --batch 4 --input-size 64x64 --json >"$tmp/kr.json" &&
   $REMAT plan resnet18 --batch 4 --input-size 64x64 --backend cpu --threads 2 --conv-algo gemm --json >"$tmp/kg.json"; then
    r=$("$PY" - "$tmp/kp.json" "$tmp/kr.json" "$tmp/kg.json" "$tmp/k.json" <<'PYEOF'
import json, sys
p, r, g, k = (json.load(open(f)) for f in sys.argv[1:])
steps = [s for s in k["steps"] if "algo" in s]
ok = (p["conv_passes"] == 40 and p["conv_passes_fastest"] == 40 and
      set(p["conv_algos"]) <= {"gemm", "direct", "winograd"} and
      sum(p["conv_algos"].values()) == 40 and p["workspace_bytes"] > 0 and
      r["workspace_bytes"] == 0 and
      p["activation_peak_bytes"] > r["activation_peak_bytes"] and
      max(s["scratch_bytes"] for s in steps) == p["workspace_bytes"] and
      g["conv_algos"] == {"gemm": 40} and
      {s["algo"] for s in steps} <= {"gemm", "direct", "winograd"})
print(ok)
PYEOF
)
    if [ "$r" = True ]; then ok "plan with the cpu kernels"; else fail "plan with the cpu kernels" "$(head -c 600 "$tmp/kp.json")"; fi
else
    fail "plan with the cpu kernels" "$(cat "$tmp/kp.json")"
fi
expect_error "unknown algorithm" "no algorithm 'fft' (it has: fit, gemm, direct, winograd)" $REMAT plan resnet18 --backend cpu --conv-algo fft
expect_error "algorithm without backend" "needs --backend cpu" $REMAT plan resnet18 --conv-algo gemm
expect_error "algorithm on ref" "ref backend has no algorithm 'gemm'" $REMAT train resnet18 --input-size 32x32 --classes 10 --batch 2 --steps 1 --conv-algo gemm

# The time model measured for the backend (remat_calibrate), cached: a plan for the cpu
# backend carries rates that are not the GPU defaults, the same on the second call (read
# from the cache file the first wrote); the ref backend's are its own.
if REMAT_CALIBRATE=1 XDG_CACHE_HOME="$tmp/cache" $REMAT plan resnet18 --input-size 32x32 --batch 2 \
       --backend cpu --threads 2 --json >"$tmp/cal1.json" 2>"$tmp/cal.err" &&
   REMAT_CALIBRATE=1 XDG_CACHE_HOME="$tmp/cache" $REMAT plan resnet18 --input-size 32x32 --batch 2 \
       --backend cpu --threads 2 --json >"$tmp/cal2.json" 2>>"$tmp/cal.err" &&
   [ "$(ls "$tmp/cache/remat" 2>/dev/null | grep -c '^calib-cpu-t2-')" = 1 ] &&
   [ "$(json_get "$tmp/cal1.json" '(j["model_flops"], j["model_bandwidth"], j["model_copy_slowdown"])')" = \
     "$(json_get "$tmp/cal2.json" '(j["model_flops"], j["model_bandwidth"], j["model_copy_slowdown"])')" ] &&
   [ "$(json_get "$tmp/cal1.json" '1e8 < j["model_flops"] < 5e12 and j["model_flops"] != 10e12 and 1e8 < j["model_bandwidth"] < 1e12 and 0 <= j["model_copy_slowdown"] <= 1')" = True ] &&
   [ "$(REMAT_CALIBRATE=0 $REMAT plan resnet18 --input-size 32x32 --batch 2 --backend cpu --threads 2 --json | json_get /dev/stdin 'j["model_flops"] == 10e12')" = True ]; then
    ok "time model calibrated and cached"
else
    fail "time model calibrated and cached" "$(cat "$tmp/cal.err"; head -c 300 "$tmp/cal1.json")"
fi

# Setup first on a bare machine: the proto is absent when make parses the Makefile and
# appears only when setup runs (as python3-onnx's does); one invocation must still build.
proto=$(ls /usr/lib/python3/dist-packages/onnx/onnx.proto /usr/include/onnx/onnx.proto 2>/dev/null | head -n 1)
if [ -n "$proto" ] && [ -f Makefile ] && command -v protoc-c >/dev/null; then
    mk() { env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u SAN -u CUDA make -s "$@"; }
    if mk OUT="$tmp/bare" ONNX_PROTO_DIRS="$tmp/bare-proto" SETUP=true gen >"$tmp/bare.log" 2>&1; then
        fail "setup first: no proto" "built without the proto"
    elif grep -q "onnx.proto not found in $tmp/bare-proto" "$tmp/bare.log"; then
        ok "setup first: no proto says what to install"
    else fail "setup first: no proto" "$(cat "$tmp/bare.log")"; fi
    if mk OUT="$tmp/fresh" ONNX_PROTO_DIRS="$tmp/fresh-proto" \
          SETUP="mkdir -p $tmp/fresh-proto && cp $proto $tmp/fresh-proto/" gen >"$tmp/fresh.log" 2>&1 &&
       [ -s "$tmp/fresh/gen/onnx.pb-c.h" ]; then ok "setup first: one invocation builds"
    else fail "setup first: one invocation builds" "$(cat "$tmp/fresh.log")"; fi
else
    skip "setup first" "no onnx.proto or protoc-c"
fi

# make install: another C program links libremat through pkg-config
if command -v pkg-config >/dev/null && [ -f Makefile ]; then
    if env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s install SAN=0 PREFIX="$tmp/prefix" >"$tmp/inst.log" 2>&1 &&
       cc -o "$tmp/ex" "$BUILD/example.c" $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs remat) \
          2>>"$tmp/inst.log" &&
       LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/ex" | grep -q "activation peak"; then ok "install and pkg-config"
    else fail "install and pkg-config" "$(tail -5 "$tmp/inst.log")"; fi
else
    skip "install and pkg-config" "pkg-config is missing"
fi

# plan --check: an ONNX model's coverage (tools/make_onnx_gap.py made the fixture)
out=$($REMAT plan tests/data/onnx_gap.onnx --check 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "Softsign x2 (first: node 0 'softsign0')" &&
   echo "$out" | grep -q "Elu x1 (first: node 3 'elu')"; then ok "plan --check lists the gaps"
else fail "plan --check lists the gaps" "rc $rc: $out"; fi
# The tanh GELU (PyTorch's export and the hand-written form) and opset 13's Hardswish
# (HardSigmoid times x) each read as one op: as many remat ops as the erf GELU and
# opset 14's HardSwish op give
if "$PY" - "$tmp" <<'PYEOF' >/dev/null 2>&1
import math, sys, torch
import torch.nn.functional as F
acts = {"erf": F.gelu, "tanh": lambda x: F.gelu(x, approximate="tanh"),
        "hand": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3)))),
        "hswish13": F.hardswish, "hswish14": F.hardswish}
for name, act in acts.items():
    lin, head = torch.nn.Linear(4, 6), torch.nn.Linear(6, 3)
    m = torch.nn.Sequential(lin, torch.nn.Module(), head)
    m[1].forward = act
    torch.onnx.export(m, torch.randn(2, 4), "%s/act_%s.onnx" % (sys.argv[1], name),
                      opset_version=14 if name == "hswish14" else 13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
PYEOF
then
    n_ops() { $REMAT plan "$tmp/act_$1.onnx" --check --json 2>&1 | sed -n 's/.*"ops":\([0-9]*\).*/\1/p'; }
    erf=$(n_ops erf); tanh=$(n_ops tanh); hand=$(n_ops hand); h13=$(n_ops hswish13); h14=$(n_ops hswish14)
    if [ -n "$erf" ] && [ "$tanh" = "$erf" ] && [ "$hand" = "$erf" ] && [ -n "$h14" ] && [ "$h13" = "$h14" ]; then
        ok "tanh GELU and opset 13's Hardswish read as one op"
    else fail "tanh GELU and opset 13's Hardswish read as one op" "ops: erf $erf, tanh $tanh, hand $hand, hardswish 13 $h13, 14 $h14"; fi
else
    skip "tanh GELU and opset 13's Hardswish read as one op" "no PyTorch for python3"
fi
# The plain-PyTorch GPT of tools/onnx_tf_reference.py with GPT-2's 1024 positions, read
# from ONNX, against the zoo's gpt2 of its configuration: its fused (D, 3D) projection
# split into q, k, v reads as three linear layers, as the zoo builds them, so the same
# parameters, values, ops and activation peak, and `remat compare` the same rows (every
# figure of --json but the planning time and, for `optimal`, what depends on where its
# MILP stood when the time limit struck: the proven gap and the incumbent's peak,
# recomputation and planned time, which differ between a loaded and an idle machine;
# optimal's budget and feasibility are still compared)
if "$PY" - "$tmp/gpt1024.onnx" <<'PYEOF' >/dev/null 2>&1
import sys, torch
sys.path.insert(0, "tools")
import onnx_tf_reference as R
m = R.GPT()
m.wpe = torch.nn.Embedding(1024, 32)
torch.onnx.export(m.train(), torch.randint(0, 64, (2, 16)), sys.argv[1], opset_version=14,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
PYEOF
then
    shape() { $REMAT plan "$@" --batch 2 2>&1 | sed -n 's/^parameters *//p; s/^values *\([0-9]*\) planned, \([0-9]*\) ops/\1 \2/p; s/^activation peak *\([0-9,]*\) bytes.*/\1/p' | tr '\n' ' '; }
    rows() { $REMAT compare "$@" --batch 2 --json --strategies none,approx-tc,approx-mc,exact-tc,exact-mc,chen-sqrtn,chen-greedy,superneurons,hybrid,blocks,selective,optimal --time-limit 2 2>&1 | tr '{' '\n' |
        sed -E 's/"(plan_seconds|optimality_gap)":[^,}]*//g
                /"strategy":"optimal"/s/"(activation_peak_bytes|arena_bytes|allocated_bytes|reduction|overhead|total_seconds)":[^,}]*//g'; }
    got=$(shape "$tmp/gpt1024.onnx")
    zoo=$(shape gpt2 --layers 2 --width 32 --heads 4 --seq-len 16 --vocab 64 --dropout 0)
    rg=$(rows "$tmp/gpt1024.onnx")
    rz=$(rows gpt2 --layers 2 --width 32 --heads 4 --seq-len 16 --vocab 64 --dropout 0)
    if [ -n "$zoo" ] && [ "$(echo $got)" = "$(echo $zoo)" ] && [ "$(echo $zoo | wc -w)" = 4 ] &&
       echo "$rz" | grep -q '"strategy":"selective","feasible":true' &&
       echo "$rz" | grep -q '"strategy":"optimal","feasible":true' && [ "$rg" = "$rz" ]; then
        ok "exported GPT against the zoo's gpt2"
    else fail "exported GPT against the zoo's gpt2" "onnx: $got; zoo: $zoo (params, values, ops, peak); compare: $(diff <(echo "$rg") <(echo "$rz") | head -5)"; fi
else
    skip "exported GPT against the zoo's gpt2" "no PyTorch for python3"
fi
out=$($REMAT plan tests/data/tiny.onnx --check --json 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '"supported":true,"unsupported":\[\]'; then
    ok "plan --check --json: all supported"
else fail "plan --check --json: all supported" "rc $rc: $out"; fi

echo "RESULT $passed $failed $skipped"
[ "$failed" -eq 0 ]
