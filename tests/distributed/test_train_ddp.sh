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
#   models   rank 1 starts from another model YAML: every rank is refused before training, naming
#            the first tensor that differs and both ranks' shapes; nothing is left running.
#   stop     rank 1 SIGSTOPped mid-epoch: rank 0 exits 1 naming rank 1 within --dist-timeout, and
#            torchrun ends (killing the stopped rank) with no process left behind.
#   val      val under torchrun on 2 ranks prints the table and writes the JSON and plots that
#            one process does.
#   cacheram --cache ram on 2 ranks: one copy in shared memory, the same file mapped by both
#            ranks and counted once in their PSS, nothing left in /dev/shm.
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

# signal_rank_1 SIGNAL [TORCHRUN_FLAGS...]: a 3-epoch run whose rank 1 gets SIGNAL in epoch 1;
# sets $status (torchrun's exit status) and $took (seconds from the signal to torchrun's end).
signal_rank_1() {
  local sig=$1 start
  shift
  torchrun_2 "$@" "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 3 --dist-timeout 10 >"$tmp/log" 2>&1 &
  agent=$!
  wait_for_file "$tmp/runs/exp/weights/last.pt" $agent || fail "no last.pt after epoch 0"
  # Into epoch 1's batches (0.8 s on 2 cores), where rank 0 waits for rank 1's gradients.
  sleep 0.3
  victim=$(worker_pid 1) || fail "rank 1 not found"
  kill -"$sig" "$victim"
  start=$SECONDS
  status=0
  timeout 150 tail --pid=$agent -f /dev/null || fail "torchrun still running after 150 s"
  wait $agent || status=$?
  took=$((SECONDS - start))
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
    # The ranks validated best.pt together (8 images each per batch): the table one process prints
    # validating it with batches of 16 at the same IoU.
    "$BIN/val" --weights "$tmp/runs/exp/weights/best.pt" --data "$tmp/data.yaml" --imgsz 64 \
      --batch-size 16 --iou-thres 0.6 --project "$tmp/val" >"$tmp/val_best.log" 2>&1 ||
      fail "val on best.pt: $(tail -3 "$tmp/val_best.log")"
    table() { sed 's/^\[default0\]://' "$1" | grep -E '^ +(all|circle|rectangle|triangle) +[0-9]'; }
    sed -n '/Validating .*best.pt/,$p' "$tmp/log" >"$tmp/final.log"
    [[ -n "$(table "$tmp/final.log")" && "$(table "$tmp/final.log")" == "$(table "$tmp/val_best.log")" ]] ||
      fail "2 ranks' final validation differs from one process's: $(table "$tmp/final.log") vs $(table "$tmp/val_best.log")"
    ;;
  val)
    # val under torchrun: 2 ranks, 2 batches each of the 100 val images (val_batch2 from rank 1),
    # print and write what one process does: the table, the JSON, the plots.
    "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 1 --noval >"$tmp/log" 2>&1 || fail "training exited $?"
    w=$tmp/runs/exp/weights/last.pt
    VAL_ARGS=(--weights "$w" --data "$tmp/data.yaml" --imgsz 64 --batch-size 32 --save-json
      --exist-ok)
    OMP_NUM_THREADS=1 "$BIN/val" "${VAL_ARGS[@]}" --project "$tmp/one" >"$tmp/one.log" 2>&1 ||
      { cp "$tmp/one.log" "$tmp/log"; fail "val exited $?"; }
    torchrun_2 "$BIN/val" "${VAL_ARGS[@]}" --project "$tmp/two" >"$tmp/log" 2>&1 ||
      fail "val under torchrun exited $?"
    table() { sed 's/^\[default0\]://' "$1" | grep -E '^ +(all|circle|rectangle|triangle) +[0-9]'; }
    [[ -n "$(table "$tmp/one.log")" && "$(table "$tmp/log")" == "$(table "$tmp/one.log")" ]] ||
      fail "the tables differ: $(table "$tmp/log") vs $(table "$tmp/one.log")"
    grep -q "2 processes share the validation" "$tmp/log" || fail "not a 2-rank validation"
    if grep -q '^\[default1\]:' "$tmp/log"; then fail "rank 1 printed: $(grep -m3 '^\[default1\]:' "$tmp/log")"; fi
    for f in last_predictions.json val_batch0_labels.jpg val_batch1_pred.jpg val_batch2_labels.jpg \
      val_batch2_pred.jpg confusion_matrix.png PR_curve.png F1_curve.png; do
      [[ -s "$tmp/one/exp/$f" ]] || fail "one process wrote no $f"
      cmp -s "$tmp/one/exp/$f" "$tmp/two/exp/$f" || fail "$f differs between 1 and 2 ranks"
    done
    [[ ! -e "$tmp/two/exp/INCOMPLETE.txt" ]] || fail "2 ranks left the folder marked incomplete"
    [[ "$(ls "$tmp/two")" == "exp" ]] || fail "run folders: $(ls "$tmp/two")"
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
    signal_rank_1 KILL --max_restarts=$restarts
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
  models)
    # The same flags on both ranks but --cfg: rank 1 builds yolov5s (the wrapper swaps it).
    printf '#!/usr/bin/env bash\n[[ $RANK == 1 ]] && set -- "${@/yolov5n.yaml/yolov5s.yaml}"\nexec "%s" "$@"\n' \
      "$BIN/train" >"$tmp/train_per_rank"
    chmod +x "$tmp/train_per_rank"
    status=0
    torchrun_2 "$tmp/train_per_rank" "${TRAIN_ARGS[@]}" --epochs 1 --dist-timeout 20 >"$tmp/log" 2>&1 ||
      status=$?
    [[ $status -ne 0 ]] || fail "two different models trained together"
    grep -q "the ranks build different models: tensor 0 is model.0.conv.weight Float \[16,3,6,6\] on rank 0 and model.0.conv.weight Float \[32,3,6,6\] on rank 1" "$tmp/log" ||
      fail "the refusal does not name both ranks' shapes"
    if grep -q "Starting training" "$tmp/log"; then fail "training started"; fi
    sleep 1
    if pgrep -f "$tmp/data.yaml" >/dev/null; then fail "processes left behind"; fi
    ;;
  stop)
    signal_rank_1 STOP
    [[ $status -ne 0 ]] || fail "torchrun exited 0 after a rank was stopped"
    grep -q "rank 0: .*lost rank 1 (no heartbeat for" "$tmp/log" || fail "rank 0 did not name rank 1"
    # Rank 0 ends at about --dist-timeout; torchrun then waits 30 s before it SIGKILLs the stopped rank.
    ((took <= 10 + 5 + 30 + 10)) || fail "took $took s to end"
    sleep 1
    if pgrep -f "$tmp/data.yaml" >/dev/null; then fail "processes left behind"; fi
    echo "rank 1 stopped: torchrun exited $status after $took s"
    ;;
  cacheram)
    torchrun_2 "$BIN/train" "${TRAIN_ARGS[@]}" --epochs 2 --cache ram >"$tmp/log" 2>&1 &
    agent=$!
    for _ in $(seq 1 1200); do
      grep -q "Cached 300 images in shared memory" "$tmp/log" && break
      kill -0 $agent 2>/dev/null || fail "training ended before caching"
      sleep 0.1
    done
    grep -q "Cached 300 images in shared memory" "$tmp/log" || fail "no shared --cache ram"
    # Each rank's mapping of the cache: the same file (device:inode), its pages counted once in the
    # ranks' PSS together (a copy per rank would count them twice, as private memory). Both ranks
    # are stopped while their smaps are read: a page the one touches between the two reads would
    # count half in one and nothing in the other.
    pids=()
    for r in 0 1; do pids[$r]=$(worker_pid $r) || fail "rank $r not found"; done
    kill -STOP "${pids[@]}"
    total_pss=0
    for r in 0 1; do
      pid=${pids[$r]}
      # The largest of its cache mappings (the training images'; the val images' is smaller).
      read -r inode size pss < <(awk '/^[0-9a-f]+-[0-9a-f]+ / {m = /yolo-ram-cache/; ino = $4 ":" $5}
        m && /^Size:/ {size = $2} m && /^Pss:/ && size > best {best = size; out = ino " " size " " $2}
        END {if (out) print out; else exit 1}' "/proc/$pid/smaps") ||
        { kill -CONT "${pids[@]}"; fail "rank $r does not map the shared cache"; }
      inodes[$r]=$inode
      total_pss=$((total_pss + pss))
    done
    kill -CONT "${pids[@]}"
    [[ "${inodes[0]}" == "${inodes[1]}" ]] || fail "the ranks map different files: ${inodes[*]}"
    ((total_pss * 100 >= size * 95 && total_pss * 100 <= size * 105)) ||
      fail "the ranks' PSS of the cache is $total_pss kB for a $size kB cache (want about one copy)"
    ls /dev/shm | grep -q "yolo-ram-cache" && fail "a cache file is left in /dev/shm while training"
    wait $agent || fail "training with --cache ram exited $?"
    echo "shared --cache ram: $size kB mapped by 2 ranks, $total_pss kB PSS in all"
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
