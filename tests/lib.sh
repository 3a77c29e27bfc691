# lib.sh - what the shell tests share (sourced): the remat under test ($REMAT, its
# folder $BUILD), Debian's python3, a temporary folder removed at exit, and the
# ok/fail/skip counters that end in "RESULT passed failed skipped" (harness_end).
set -u
REMAT=${REMAT:-build/remat}
BUILD=$(dirname "$REMAT")
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0; skipped=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
skip() { echo "skip $1: $2"; skipped=$((skipped + 1)); }
