#!/usr/bin/env bash
# Usage: test_train_ddp.sh BIN_DIR MODE
# `train` under the real torchrun, 2 CPU ranks over Gloo, on tiny generated shapes (64 px):
#   e2e      2 ranks with --sync-bn: exit 0, one run dir written by rank 0 only (rank 1 prints
#            nothing), results.csv per epoch, last.pt loads in val.
#   nodes    two torchrun agents on 127.0.0.1 as two nodes (--nnodes=2, 1 process each).
#   kill     rank 1 SIGKILLed mid-epoch: rank 0 exits non-zero within --dist-timeout + 30 s,
#            torchrun names the lost rank, no process is left behind.
#   restart  the same kill with --max_restarts=1: the workers restart, resume from last.pt and
#            finish the run.
#   resume   a single-process run stopped by SIGTERM resumes under torchrun with 2 ranks (another
#            world size than the original run's) and finishes.
#   corrupt  the training images become unreadable mid-run: the rank that hits one stops with an
#            error naming the file (shown in torchrun's summary), every rank stops, none is left.
#   checks   YOLOv5's DDP refusals (batch not divisible by WORLD_SIZE, --image-weights, --evolve).
set -euo pipefail
BIN=${1:?usage: test_train_ddp.sh BIN_DIR MODE}
MODE=${2:?usage: test_train_ddp.sh BIN_DIR MODE}
TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
[[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
start_train_test "$MODE"
TRAIN_ARGS=(--data "$tmp/data.yaml" --cfg yolov5n.yaml --imgsz 64 --batch-size 16 --workers 1
  --noplots --project "$tmp/runs" --device cpu)
# Debian's torchrun 1.13: --no_python, and -r 1 -t 1 (its default redirects crash on Python 3.11).
torchrun_2() { timeout -k 10 240 "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node=2 \
  --master_addr=127.0.0.1 --master_port="$(free_port)" "$@"; }
worker_pid() {  # the pid of rank $1 of this test's run
  local p
  for p in $(pgrep -f "$tmp/data.yaml" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$1" &&
      ! tr '\0' '\n' <"/proc/$p/cmdline" | grep -q torchrun; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
wait_for_file() {  # $1 file, $2 pid that must stay alive, up to 120 s
  for _ in $(seq 1 1200); do
    [[ -f "$1" ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

case "$MODE" in
  e2e)
    torchrun_2 "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 2 --sync-bn >"$tmp/log" 2>&1 ||
      fail "2-rank training exited $?"
    [[ "$(ls "$tmp/runs")" == "exp" ]] || fail "run dirs: $(ls "$tmp/runs") (want exp only)"
    grep -q "Using SyncBatchNorm" "$tmp/log" || fail "SyncBatchNorm not used"
    grep -q "DDP: rank 0 of 2" "$tmp/log" || fail "not a 2-rank run"
    if grep -q '^\[default1\]:' "$tmp/log"; then fail "rank 1 printed: $(grep -m3 '^\[default1\]:' "$tmp/log")"; fi
    [[ $(rows "$tmp/runs/exp/results.csv") -eq 2 ]] || fail "results.csv rows != 2"
    for f in opt.yaml hyp.yaml weights/last.pt weights/best.pt; do
      [[ -f "$tmp/runs/exp/$f" ]] || fail "missing $f"
    done
    "$BIN/val" --weights "$tmp/runs/exp/weights/last.pt" --data "$tmp/data.yaml" --imgsz 64 \
      --project "$tmp/val" >"$tmp/val.log" 2>&1 || fail "val on last.pt: $(tail -3 "$tmp/val.log")"
    ;;
  nodes)
    port=$(free_port)
    for node in 0 1; do
      timeout 240 "$TORCHRUN" --no_python -r 1 -t 1 --nnodes=2 --node_rank=$node \
        --nproc_per_node=1 --master_addr=127.0.0.1 --master_port="$port" \
        "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 1 >"$tmp/node$node.log" 2>&1 &
      pids[$node]=$!
    done
    for node in 0 1; do
      wait "${pids[$node]}" || { cp "$tmp/node$node.log" "$tmp/log"; fail "node $node exited $?"; }
    done
    cp "$tmp/node0.log" "$tmp/log"
    grep -q "DDP: rank 0 of 2" "$tmp/node0.log" || fail "node 0 is not rank 0 of 2"
    [[ "$(ls "$tmp/runs")" == "exp" ]] || fail "run dirs: $(ls "$tmp/runs")"
    [[ $(rows "$tmp/runs/exp/results.csv") -eq 1 ]] || fail "results.csv rows != 1"
    ;;
  kill | restart)
    restarts=0
    [[ "$MODE" == restart ]] && restarts=1
    torchrun_2 --max_restarts=$restarts "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 3 \
      --dist-timeout 10 >"$tmp/log" 2>&1 &
    agent=$!
    wait_for_file "$tmp/runs/exp/weights/last.pt" $agent || fail "no last.pt after epoch 0"
    # Into epoch 1's batches (0.8 s on 2 cores), where rank 0 waits for rank 1's gradients; at its
    # end rank 0 validates alone and would stop on torchrun's SIGTERM before missing rank 1.
    sleep 0.3
    victim=$(worker_pid 1) || fail "rank 1 not found"
    kill -KILL "$victim"
    start=$SECONDS
    status=0
    timeout 150 tail --pid=$agent -f /dev/null || fail "torchrun still running after 150 s"
    wait $agent || status=$?
    took=$((SECONDS - start))
    if [[ "$MODE" == kill ]]; then
      [[ $status -ne 0 ]] || fail "torchrun exited 0 after a rank was killed"
      ((took <= 40)) || fail "took $took s to stop (want <= dist-timeout 10 + 30)"
      grep -q "exitcode  *: -9" "$tmp/log" || fail "torchrun did not report the killed rank"
      grep -q "lost rank 1 (no heartbeat" "$tmp/log" || fail "rank 0 did not name the lost rank"
      sleep 1
      if pgrep -f "$tmp/data.yaml" >/dev/null; then fail "processes left behind"; fi
      echo "rank 1 killed: torchrun exited $status after $took s"
    else
      [[ $status -eq 0 ]] || fail "the restarted run exited $status"
      grep -q "torchrun restart 1: resuming" "$tmp/log" || fail "the restart did not resume"
      [[ $(rows "$tmp/runs/exp/results.csv") -eq 3 ]] || fail "results.csv rows != 3"
      [[ "$(ls "$tmp/runs")" == "exp" ]] || fail "run dirs: $(ls "$tmp/runs")"
    fi
    ;;
  resume)
    "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 2 >"$tmp/log" 2>&1 &
    pid=$!
    last="$tmp/runs/exp/weights/last.pt"
    wait_for_file "$last" $pid || fail "no last.pt after epoch 0"
    kill -TERM $pid
    status=0
    wait $pid || status=$?
    [[ $status -ne 0 ]] || fail "the single-process run finished before it was stopped"
    torchrun_2 "$BIN/train" --resume "$last" >"$tmp/log" 2>&1 || fail "resume under torchrun exited $?"
    grep -q "Resuming training" "$tmp/log" || fail "did not resume"
    grep -q "DDP: rank 0 of 2" "$tmp/log" || fail "not a 2-rank run"
    [[ $(rows "$tmp/runs/exp/results.csv") -eq 2 ]] || fail "results.csv rows != 2"
    ;;
  corrupt)
    torchrun_2 "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 3 --dist-timeout 10 >"$tmp/log" 2>&1 &
    agent=$!
    wait_for_file "$tmp/runs/exp/weights/last.pt" $agent || fail "no last.pt after epoch 0"
    for f in "$tmp"/shapes/images/train/*; do printf 'not an image' >"$f"; done
    status=0
    timeout 150 tail --pid=$agent -f /dev/null || fail "torchrun still running after 150 s"
    wait $agent || status=$?
    [[ $status -ne 0 ]] || fail "torchrun exited 0 with unreadable images"
    grep -q "traceback : .*shapes/images/train/.*" "$tmp/log" ||
      fail "torchrun's summary does not name the unreadable file"
    sleep 1
    if pgrep -f "$tmp/data.yaml" >/dev/null; then fail "processes left behind"; fi
    ;;
  checks)
    export LOCAL_RANK=0 RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1
    MASTER_PORT=$(free_port)
    export MASTER_PORT
    expect2() {  # $1 message, rest: train args
      local msg=$1 status=0
      shift
      timeout 60 "$BIN/train" "${TRAIN_ARGS[@]}" "$@" >"$tmp/log" 2>&1 || status=$?
      [[ $status -eq 2 ]] || fail "$* exited $status (want 2)"
      grep -q -- "$msg" "$tmp/log" || fail "$* did not say '$msg'"
    }
    expect2 "must be multiple of WORLD_SIZE" --epochs 1 --batch-size 15
    expect2 "--image-weights is not compatible with YOLOv5 Multi-GPU DDP" --epochs 1 --image-weights
    expect2 "evolve" --epochs 1 --evolve 2
    # NCCL only where it can work: on CPU ranks it is refused before any connection, with the fix.
    expect2 "use --dist-backend gloo" --epochs 1 --device cpu --dist-backend nccl
    # Every rank's error reaches torchrun's summary through TORCHELASTIC_ERROR_FILE.
    unset LOCAL_RANK RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
    status=0
    torchrun_2 "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 1 --cfg no_such_model.yaml >"$tmp/log" 2>&1 ||
      status=$?
    [[ $status -ne 0 ]] || fail "torchrun exited 0 with a missing --cfg"
    grep -q "traceback : UsageError: .*no_such_model.yaml" "$tmp/log" ||
      fail "torchrun did not report the rank's error from its error file"
    ;;
  *) fail "unknown mode" ;;
esac
echo "ddp $MODE: ok"
