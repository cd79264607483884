#!/usr/bin/env bash
# train --nproc-per-node from the command line: bad values and combinations exit 2 naming the
# flag, file flags are checked once before any worker starts, and the workers (this executable
# without the flag) run and their failure is reported with its rank and status.
set -u
BIN=${1:?usage: test_launcher_cli.sh BIN_DIR}
T="$BIN/train"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
fails=0
check() {  # check EXPECTED_STATUS EXPECTED_TEXT UNEXPECTED_TEXT -- command...
  local want=$1 text=$2 unwanted=$3
  shift 4
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out" ||
    { [ -n "$unwanted" ] && grep -qF -- "$unwanted" <<<"$out"; }; then
    echo "FAIL: $* -> status $status (want $want), output must have '$text'" \
      "${unwanted:+and lack '$unwanted'}:"
    echo "$out" | tail -8
    fails=$((fails + 1))
  else
    echo "ok: $* -> $status"
  fi
}
unset LOCAL_RANK RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
check 0 "--nproc-per-node" "" -- "$T" --help
for bad in 1 0 -2 two; do
  check 2 "--nproc-per-node" "launcher:" -- "$T" --nproc-per-node "$bad"
done
check 2 "--nproc-per-node" "launcher:" -- "$T" --nproc_per_node=1
check 2 "nproc-per-node" "launcher:" -- "$T" --nproc-per-node
check 2 "--evolve" "launcher:" -- "$T" --nproc-per-node 2 --evolve 5
check 2 "--local_rank" "launcher:" -- "$T" --nproc-per-node 2 --local_rank 0
check 2 "torchrun" "launcher:" -- env LOCAL_RANK=0 "$T" --nproc-per-node auto
# Checked once in the launcher: no worker starts.
check 2 "--weights" "launcher:" -- "$T" --nproc-per-node 2 --cfg yolov5n.yaml --weights no_such.pt
check 2 "--resume: checkpoint 'no_such/last.pt' not found" "launcher:" -- \
  "$T" --nproc-per-node 2 --resume no_such/last.pt
# The batch must split over the workers: said at once, before a thousand processes start.
check 2 "--batch-size 4 must be multiple of WORLD_SIZE (1000)" "launcher:" -- \
  "$T" --nproc-per-node 1000 --batch-size 4
# The workers start, each without --nproc-per-node (else they would refuse LOCAL_RANK), and fail
# on the device, which each rank chooses itself; the launcher exits with that status and names
# the rank.
check 2 "--device" "torchrun" -- "$T" --nproc-per-node 2 --cfg yolov5n.yaml --device 7
check 2 "launcher: training failed: worker rank" "" -- \
  "$T" --nproc-per-node 2 --cfg yolov5n.yaml --device 7
echo "launcher cli: $fails failed"
[ "$fails" -eq 0 ]
