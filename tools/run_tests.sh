#!/usr/bin/env bash
# Runs every test program given, then the CLI tests, and prints "N passed, N failed"
# (and skipped). Exits non-zero when anything failed or a program crashed.
set -u
# libgomp threads that spin while they wait steal the cores of whatever runs beside them
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# the time model at its defaults, so that plans do not depend on a measurement; cli.sh
# checks the calibrated one
export REMAT_CALIBRATE=${REMAT_CALIBRATE:-0}
build=$1; shift
passed=0; failed=0; skipped=0; crashed=0
for t in "$@" tests/cli.sh tests/report.sh tests/mpi.sh; do
    [ -e "$t" ] || continue
    echo "== $t"
    t0=$(date +%s%N)
    if [ "${t%.sh}" != "$t" ]; then out=$(REMAT="$build/remat" bash "$t" 2>&1); rc=$?
    else out=$("$t" 2>&1); rc=$?; fi
    printf '%s\n' "$out" | grep -v '^RESULT '
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '== %s: %d.%03d s\n' "$t" $((ms / 1000)) $((ms % 1000))
    res=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
    if [ -z "$res" ]; then
        echo "CRASH $t (exit $rc, no RESULT line)"; crashed=$((crashed + 1)); continue
    fi
    read -r _ p f s <<<"$res"
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "CRASH $t (exit $rc after its RESULT line)"; crashed=$((crashed + 1))
    fi
done
failed=$((failed + crashed))
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
