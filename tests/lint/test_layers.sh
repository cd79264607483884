#!/usr/bin/env bash
# Usage: test_layers.sh SOURCE_ROOT
# The libraries include only from the layers before them (docs/ARCHITECTURE.md):
#   core -> models, data -> viz -> eval -> distributed -> engine -> apps
# so the dependency order stays acyclic; apps/ never holds code another folder includes.
set -euo pipefail
ROOT=${1:?usage: test_layers.sh SOURCE_ROOT}
cd "$ROOT"
declare -A ALLOWED=(
  [utils/core]="utils/core"
  [models]="utils/core models"
  [data]="utils/core data"
  [utils/viz]="utils/core utils/viz"
  [utils/eval]="utils/core models data utils/viz utils/eval"
  [utils/distributed]="utils/core models utils/distributed"
  [utils/engine]="utils/core models data utils/viz utils/eval utils/distributed utils/engine"
  [apps]="utils/core models data utils/viz utils/eval utils/distributed utils/engine"
)
bad=0
for layer in "${!ALLOWED[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    ok=0
    for a in ${ALLOWED[$layer]}; do
      [[ "$inc" == "$a/"* ]] && ok=1
    done
    # A subfolder of apps/ may include its own headers only.
    [[ "$layer" == apps && "$inc" == "$(dirname "$file")/"* ]] && ok=1
    if ((!ok)); then
      echo "$file includes $inc: $layer may include only from ${ALLOWED[$layer]}"
      bad=1
    fi
  done < <(grep -rHE '^#include "[a-z_]+/' --include='*.h' --include='*.cpp' "$layer" || true)
done
for f in $(find utils -maxdepth 1 -name '*.h' -o -maxdepth 1 -name '*.cpp'); do
  echo "$f: sources belong in a layer's folder (utils/core, viz, eval, distributed or engine)"
  bad=1
done
((bad == 0)) || { echo "FAIL: includes against the layer order"; exit 1; }
echo "layers ok: core -> models, data -> viz -> eval -> distributed -> engine -> apps"
