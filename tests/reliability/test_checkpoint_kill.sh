#!/usr/bin/env bash
# SIGKILL while checkpoints are being written: runs of train on tiny data are killed (kill -9),
# half of them the moment a temporary checkpoint file appears (mid-save), the others at a random
# moment after their first complete save. After every kill, weights/last.pt and best.pt, when they
# exist, must load in full.
# ROUNDS (default 8) sets the number of runs.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cd "$tmp"
"$TOOL" dataset "$tmp/data" 4 2
wdir="$tmp/runs/k/weights"
rounds=${ROUNDS:-8}
mid_save=0 checked=0
for round in $(seq 1 "$rounds"); do
  # --exist-ok: every run writes over the previous run's last.pt, which must survive the kill.
  "$BIN/train" --data "$tmp/data/data.yaml" "${TINY[@]}" --epochs 1000 --name k --exist-ok \
    >"$tmp/log$round" 2>&1 &
  pid=$!
  cleanup_hooks+=("kill -9 $pid 2>/dev/null")
  if [ $((round % 2)) -eq 1 ]; then
    # Poll for a new temporary file (write_file_atomic's), then kill at once. Earlier kills may
    # have left old ones, which do not count.
    old_tmps=$(compgen -G "$wdir/.*.tmp*" || true)
    for _ in $(seq 1 3000); do
      if compgen -G "$wdir/.*.tmp*" | grep -vxF -- "$old_tmps" >/dev/null; then
        mid_save=$((mid_save + 1))
        break
      fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.005
    done
  else
    # Wait for this run's first complete save (a busy machine may take many seconds to get there),
    # then kill at a random moment after it: between saves or during a later one.
    touch "$tmp/round_start"
    for _ in $(seq 1 1200); do
      [ "$wdir/last.pt" -nt "$tmp/round_start" ] && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  fi
  kill -9 $pid 2>/dev/null || true
  status=0
  wait $pid 2>/dev/null || status=$?
  if [ "$status" -ne 137 ]; then
    echo "FAIL: round $round: train exited $status before the kill"
    tail -5 "$tmp/log$round"
    exit 1
  fi
  for f in "$wdir/last.pt" "$wdir/best.pt"; do
    [ -f "$f" ] || continue
    if ! out=$("$TOOL" check "$f" 2>&1); then
      echo "FAIL: round $round: $f does not load after SIGKILL: $out"
      fails=$((fails + 1))
    else
      checked=$((checked + 1))
    fi
  done
  echo "round $round: killed; $(ls -A "$wdir" 2>/dev/null | tr '\n' ' ')"
done
[ -f "$wdir/last.pt" ] || { echo "FAIL: no run got as far as a last.pt"; exit 1; }
[ "$mid_save" -gt 0 ] || { echo "FAIL: no kill landed during a save"; fails=$((fails + 1)); }
echo "$rounds runs killed, $mid_save while a temporary checkpoint existed; $checked loads ok"
stale=$(compgen -G "$wdir/.*.tmp*" | wc -l || true)
echo "temporary files left by killed saves: $stale"
finish
