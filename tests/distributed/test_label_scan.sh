#!/usr/bin/env bash
# Usage: test_label_scan.sh DIST_EQUIVALENCE
# The label check shared by 2 ranks through the real torchrun: the cache it writes is byte for byte
# the one a single process writes (records, counts and warnings in the same order, a corrupt label
# and a missing one among them), rank 0 says the ranks shared it, and a second run reads the cache.
set -euo pipefail
PROG=${1:?usage: test_label_scan.sh DIST_EQUIVALENCE}
TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
[[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
tmp=$(mktemp -d)
trap 'pkill -KILL -f "$tmp/" 2>/dev/null || true; rm -rf "$tmp"' EXIT
ln -s "$PROG" "$tmp/marker"
fail() { echo "FAIL: $*"; tail -20 "$tmp/log"; exit 1; }
run() {  # run NPROC: the scan on NPROC ranks, its output in $tmp/log
  timeout -k 5 120 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node="$1" \
    --master_addr=127.0.0.1 --master_port="$(free_port)" "$tmp/marker" scan "$tmp/shapes" \
    >"$tmp/log" 2>&1 || fail "the scan on $1 ranks exited $?"
}
run 1  # makes the data
labels=$tmp/shapes/labels/train
mapfile -t names < <(ls "$labels" | sort)
((${#names[@]} >= 100)) || fail "only ${#names[@]} label files"
echo "0 0.5 0.5 0.2" >"$labels/${names[20]}"  # corrupt, in rank 0's share
rm "$labels/${names[90]}"                     # missing, in rank 1's share
echo "7 0.5 0.5 0.2 0.2" >"$labels/${names[100]}"  # class 7 of 3: corrupt
rm -f "$tmp/shapes/labels/train.cache"
run 1
cp "$tmp/shapes/labels/train.cache" "$tmp/one.cache"
grep -q "1 missing, 0 empty, 2 corrupt" "$tmp/log" || fail "one process: not 1 missing and 2 corrupt"
rm "$tmp/shapes/labels/train.cache"
run 2
grep -q "Scanned labels for .*train.cache on 2 ranks: .* 1 missing, 0 empty, 2 corrupt" "$tmp/log" ||
  fail "rank 0 does not report the check shared by 2 ranks"
cmp "$tmp/one.cache" "$tmp/shapes/labels/train.cache" ||
  fail "2 ranks wrote another cache than 1 process"
grep -q "\[rank1\] 118 images with labels of 120 in" "$tmp/log" || fail "rank 1 has other labels"
run 2
grep -q "Labels from .*train.cache:" "$tmp/log" || fail "the second run did not read the cache"
echo "label scan: 2 ranks wrote the cache 1 process writes"
