#!/usr/bin/env bash
# Usage: test_launcher_train.sh BIN_DIR MODE
# `train --nproc-per-node 2` running the real DDP path (2 CPU ranks over Gloo, 64 px shapes):
#   torchrun  one epoch through the launcher and through torchrun with the same flags give the
#             same last.pt weights (skipped without torchrun and Python's torch).
#   stop      SIGINT to the launcher mid-run: exit 130, every worker gone, last.pt resumable;
#             `--nproc-per-node 2 --resume` then finishes the run.
set -euo pipefail
BIN=${1:?usage: test_launcher_train.sh BIN_DIR MODE}
MODE=${2:?usage: test_launcher_train.sh BIN_DIR MODE}
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
start_train_test "$MODE"
TRAIN_ARGS=(--data "$tmp/data.yaml" --cfg yolov5n.yaml --imgsz 64 --batch-size 8 --workers 1
  --noplots --project "$tmp/runs" --device cpu)
no_workers_left() {
  local left
  left=$(pgrep -f "$tmp/data.yaml" || true)
  [[ -z "$left" ]] || fail "processes left behind: $(ps -o pid,stat,args -p "${left//$'\n'/,}")"
}

case "$MODE" in
  torchrun)
    TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
    [[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
    "${YOLO_PYTHON:-/usr/bin/python3}" -c 'import torch' 2>/dev/null || { echo "no Python torch: skipping"; exit 77; }
    "$BIN/train" --nproc-per-node 2 "${TRAIN_ARGS[@]}" --epochs 1 --name launcher >"$tmp/log" 2>&1 ||
      fail "launcher run exited $?"
    grep -q "DDP: rank 0 of 2" "$tmp/log" || fail "not a 2-rank run"
    port=$(free_port)
    # Debian's torchrun 1.13: --no_python, and -r 1 -t 1 (its default redirects crash on 3.11).
    timeout -k 10 240 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node=2 \
      --master_addr=127.0.0.1 --master_port="$port" \
      "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 1 --name torchrun >"$tmp/log" 2>&1 ||
      fail "torchrun run exited $?"
    "${YOLO_PYTHON:-/usr/bin/python3}" - "$tmp/runs/launcher/weights/last.pt" "$tmp/runs/torchrun/weights/last.pt" <<'PY' ||
import sys, torch
a, b = (torch.load(p)["model"] for p in sys.argv[1:3])
assert a.keys() == b.keys(), "different state_dict keys"
worst = max(((a[k].double() - b[k].double()).abs().max().item() if a[k].numel() else 0.0, k)
            for k in a)
print(f"{len(a)} tensors, largest difference {worst[0]:.3g} ({worst[1]})")
sys.exit(0 if worst[0] <= 1e-6 else 1)
PY
      fail "launcher and torchrun weights differ"
    ;;
  stop)
    "$BIN/train" --nproc-per-node 2 "${TRAIN_ARGS[@]}" --epochs 3 >"$tmp/log" 2>&1 &
    launcher=$!
    for _ in $(seq 1 1800); do  # up to 180 s for the first epoch
      [[ -f "$tmp/runs/exp/results.csv" ]] && break
      kill -0 "$launcher" 2>/dev/null || fail "the launcher ended before epoch 0 finished"
      sleep 0.1
    done
    [[ -f "$tmp/runs/exp/results.csv" ]] || fail "epoch 0 did not finish in time"
    kill -INT "$launcher"
    status=0
    wait "$launcher" || status=$?
    [[ $status -eq 130 ]] || fail "launcher exited $status after SIGINT (want 130)"
    grep -q "launcher: got SIGINT" "$tmp/log" || fail "no message about the SIGINT"
    grep -q "resume with --resume" "$tmp/log" || fail "rank 0 did not save a resumable last.pt"
    no_workers_left
    "$BIN/train" --nproc-per-node 2 --resume "$tmp/runs/exp/weights/last.pt" >"$tmp/log" 2>&1 ||
      fail "resume through the launcher exited $?"
    grep -q "Resuming training" "$tmp/log" || fail "did not resume"
    [[ $(rows "$tmp/runs/exp/results.csv") -eq 3 ]] || fail "results.csv rows != 3 after resume"
    no_workers_left
    ;;
  *) fail "unknown mode" ;;
esac
echo "ok ($MODE)"
