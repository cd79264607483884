#!/usr/bin/env bash
# Usage: test_complexity.sh SOURCE_ROOT
# No function in the project's C++ sources is longer than 120 lines of code or has a cyclomatic
# complexity above 40, as lizard counts them (lizard is pinned in scripts/requirements-tools.txt
# and installed into .venv by scripts/setup.sh).
set -euo pipefail
ROOT=${1:?usage: test_complexity.sh SOURCE_ROOT}
LIZARD=""
for c in "${YOLO_PYTHON:+$(dirname "$YOLO_PYTHON")/lizard}" "$ROOT/.venv/bin/lizard"; do
  [[ -n "$c" && -x "$c" ]] && { LIZARD=$c; break; }
done
if [[ -z "$LIZARD" ]]; then
  echo "FAIL: lizard not found in the build's Python environment or $ROOT/.venv;" \
    "run scripts/setup.sh (it installs scripts/requirements-tools.txt)"
  exit 1
fi
cd "$ROOT"
if ! "$LIZARD" -l cpp -C 40 -L 120 -w apps data models utils tests; then
  echo "FAIL: the functions above exceed 120 lines of code or complexity 40: split them"
  exit 1
fi
# The totals: lines of code, functions, averages.
"$LIZARD" -l cpp -C 40 -L 120 apps data models utils tests | tail -3
