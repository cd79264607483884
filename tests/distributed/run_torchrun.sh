#!/usr/bin/env bash
# Usage: run_torchrun.sh NPROC PROGRAM [ARGS...]
# Launches PROGRAM on NPROC local ranks through the real torchrun (Gloo on CPU), on a free port so
# tests can run in parallel. Exits 77 (skip) when torchrun is not installed.
set -euo pipefail
nproc=$1
shift
TORCHRUN=${TORCHRUN:-$(command -v torchrun || true)}
[[ -n "$TORCHRUN" ]] || { echo "torchrun not found: skipping"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
port=$(free_port)
# Debian's torchrun 1.13 spells it --no_python and needs -r 1 -t 1 on Python 3.11.
exec timeout -k 10 "${DIST_TEST_TIMEOUT:-280}" "$TORCHRUN" --no_python -r 1 -t 1 \
  --nproc_per_node="$nproc" --master_addr=127.0.0.1 --master_port="$port" "$@"
