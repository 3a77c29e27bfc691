#!/usr/bin/env bash
# Runs every test program given, then the CLI tests, and prints "N passed, N failed"
# (and skipped). Exits non-zero when anything failed or a program crashed.
#
# The test programs run REMAT_TEST_JOBS at a time (default 2, one per core here; 1 runs
# them one after another), the longest first, each block of output printed whole when
# its program ends. Those whose checks depend on the machine's speed (a MILP's time
# limit, timing measurements) and the shell scripts (which time mpirun and the solver
# under --time-limit) run alone afterwards.
set -u
# libgomp threads that spin while they wait steal the cores of whatever runs beside them
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# the time model at its defaults, so that plans do not depend on a measurement; cli.sh
# checks the calibrated one
export REMAT_CALIBRATE=${REMAT_CALIBRATE:-0}
build=$1; shift
jobs_max=${REMAT_TEST_JOBS:-2}
# the longest programs, longest first (alone on the 2-core machine: about 260, 210, 100,
# 55, 32 and 28 s), so that the short ones fill the other core beside them
long="test_onnx test_train test_onnx_vision test_tiny test_onnx_tf test_plan"
alone="test_calibrate test_optimal test_optimal_fit test_cpu test_cpu_seq"
passed=0; failed=0; skipped=0; crashed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/remat-tests.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT

# runs test $1 in the background into $tmp/$2.{out,rc,ms}
launch() {
    (
        t0=$(date +%s%N)
        if [ "${1%.sh}" != "$1" ]; then REMAT="$build/remat" bash "$1" >"$tmp/$2.out" 2>&1
        else "$1" >"$tmp/$2.out" 2>&1; fi
        rc=$?
        echo $(( ($(date +%s%N) - t0) / 1000000 )) >"$tmp/$2.ms"
        echo "$rc" >"$tmp/$2.rc"
    ) &
}

# prints test $1's output (from $tmp/$2.*) and adds its RESULT line to the totals
report() {
    local t=$1 f=$tmp/$2 ms rc res p fl s
    ms=$(cat "$f.ms"); rc=$(cat "$f.rc")
    echo "== $t"
    grep -v '^RESULT ' "$f.out"
    printf '== %s: %d.%03d s\n' "$t" $((ms / 1000)) $((ms % 1000))
    res=$(grep '^RESULT ' "$f.out" | tail -n 1)
    if [ -z "$res" ]; then
        echo "CRASH $t (exit $rc, no RESULT line)"; crashed=$((crashed + 1)); return
    fi
    read -r _ p fl s <<<"$res"
    passed=$((passed + p)); failed=$((failed + fl)); skipped=$((skipped + s))
    if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
        echo "CRASH $t (exit $rc after its RESULT line)"; crashed=$((crashed + 1))
    fi
}

# runs the tests $2... at most $1 at a time, reporting each as it ends
run_set() {
    local max=$1 i=0 k done_any
    shift
    local -a names=("$@") running=()
    while [ $i -lt ${#names[@]} ] || [ ${#running[@]} -gt 0 ]; do
        while [ $i -lt ${#names[@]} ] && [ ${#running[@]} -lt "$max" ]; do
            launch "${names[$i]}" "$i"; running+=("$i"); i=$((i + 1))
        done
        wait -n 2>/dev/null || true
        done_any=0
        for k in "${!running[@]}"; do
            if [ -e "$tmp/${running[$k]}.rc" ]; then
                report "${names[${running[$k]}]}" "${running[$k]}"
                rm -f "$tmp/${running[$k]}".*
                unset 'running[k]'; done_any=1
            fi
        done
        running=("${running[@]}")
        # a job ended between wait -n and the scan, or wait returned for another reason
        [ $done_any -eq 1 ] || [ ${#running[@]} -eq 0 ] || sleep 0.05
    done
}

together=(); by_themselves=()
for l in $long; do
    for t in "$@"; do
        [ -e "$t" ] && [ "$(basename "$t")" = "$l" ] && together+=("$t")
    done
done
for t in "$@"; do
    [ -e "$t" ] || continue
    b=$(basename "$t")
    case " $long " in *" $b "*) continue;; esac
    case " $alone " in *" $b "*) by_themselves+=("$t"); continue;; esac
    together+=("$t")
done
for t in tests/cli.sh tests/report.sh tests/mpi.sh; do
    [ -e "$t" ] && by_themselves+=("$t")
done
run_set "$jobs_max" "${together[@]}"
run_set 1 "${by_themselves[@]}"
failed=$((failed + crashed))
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
