#!/usr/bin/env bash
# Usage: run_ultralytics.sh SCRIPT.py ARGS...: runs a test script with Ultralytics 8.4.190
# (scripts/requirements-ultralytics.txt in .cache/test-venv-ultralytics), or fails saying how to
# install it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="$ROOT/.cache/test-venv-ultralytics/bin/python"
if [[ ! -x "$PY" ]]; then
  echo "FAIL: $PY is missing: Ultralytics 8.4.190 is not installed; run" \
    "scripts/setup.sh --test-packages (scripts/test.sh does), which installs" \
    "scripts/requirements-ultralytics.txt there"
  exit 1
fi
# Ultralytics offline and quiet: no network checks, pip AutoUpdate or Platform logging, no
# output but errors unless YOLO_VERBOSE=true (which parse_model's layer tables need).
export YOLO_OFFLINE=true YOLO_AUTOINSTALL=false YOLO_VERBOSE="${YOLO_VERBOSE:-false}"
unset ULTRALYTICS_API_KEY
export PYTHONDONTWRITEBYTECODE=1
# One thread per process, as ctest runs another test beside this one.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Settings in a throwaway folder (Ultralytics reads YOLO_CONFIG_DIR/Ultralytics), written whole so
# that Ultralytics neither announces a new settings file nor migrates it: no analytics sync, no
# integrations, and datasets, weights and runs kept out of the repository.
export YOLO_CONFIG_DIR="${YOLO_CONFIG_DIR:-$(mktemp -d)}"
cfg="$YOLO_CONFIG_DIR/Ultralytics"
mkdir -p "$cfg"
[[ -f "$cfg/settings.json" ]] || cat >"$cfg/settings.json" <<EOF
{"settings_version": "0.0.8", "datasets_dir": "$cfg/datasets", "weights_dir": "$cfg/weights",
 "runs_dir": "$cfg/runs", "uuid": "0", "sync": false, "api_key": "", "openai_api_key": "",
 "clearml": false, "comet": false, "dvc": false, "mlflow": false, "raytune": false,
 "tensorboard": false, "wandb": false, "vscode_msg": false, "openvino_msg": false}
EOF
# Local fonts for check_dataset and the plots, which would otherwise download Arial.
font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
for f in Arial.ttf Arial.Unicode.ttf; do
  [[ -f "$font" && ! -f "$cfg/$f" ]] && cp "$font" "$cfg/$f"
done
exec "$PY" "$@"
