#!/usr/bin/env bash
# Usage: test_silent_rank.sh DIST_EQUIVALENCE
# A rank stopped with SIGSTOP while rank 0 waits in the store (not in a collective): rank 0 must
# exit 1 within the 5 s timeout (plus a few seconds of heartbeat reads) with one line naming
# rank 1, torchrun must report it from the error file, and no process may be left behind (torchrun
# kills the stopped rank).
set -euo pipefail
PROG=${1:?usage: test_silent_rank.sh DIST_EQUIVALENCE}
TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
[[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
tmp=$(mktemp -d)
trap 'pkill -KILL -f "$tmp/marker" 2>/dev/null || true; rm -rf "$tmp"' EXIT
ln -s "$PROG" "$tmp/marker"  # a name only this test's processes carry
start=$SECONDS
status=0
timeout -k 5 120 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node=2 --master_addr=127.0.0.1 \
  --master_port="$(free_port)" "$tmp/marker" silent >"$tmp/log" 2>&1 || status=$?
took=$((SECONDS - start))
cat "$tmp/log"
[[ $status -ne 0 && $status -ne 124 ]] || { echo "FAIL: torchrun exited $status"; exit 1; }
grep -q "rank 0: lost rank 1 (no heartbeat for [0-9]* s: stopped, hung or cut off" "$tmp/log" ||
  { echo "FAIL: rank 0 did not name the silent rank"; exit 1; }
grep -q "traceback : RuntimeError: rank 0: lost rank 1" "$tmp/log" ||
  { echo "FAIL: torchrun's summary does not show rank 0's error file"; exit 1; }
grep -q "the wait ended without the watchdog" "$tmp/log" && { echo "FAIL: no watchdog"; exit 1; }
sleep 1
if pgrep -f "$tmp/marker" >/dev/null; then echo "FAIL: processes left behind"; exit 1; fi
echo "silent rank: torchrun exited $status after $took s"
