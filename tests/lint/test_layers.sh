#!/usr/bin/env bash
# Usage: test_layers.sh SOURCE_ROOT
# The libraries include only from the layers before them (docs/ARCHITECTURE.md):
#   core -> models, data -> viz -> eval -> export, distributed -> engine -> command -> apps
# so the dependency order stays acyclic; apps/ never holds code another folder includes. Inside
# utils/core the foundation (its top-level files) includes neither io/ nor runtime/, and those two
# do not include each other. val and detect do not include training's libraries (but val the
# process group, to share a validation over ranks). The public headers (include/yolo) include
# nothing of the project: yolo/detector.h is implemented in
# utils/eval, yolo/train.h in utils/engine, and only those layers and the ones after use them.
set -euo pipefail
ROOT=${1:?usage: test_layers.sh SOURCE_ROOT}
cd "$ROOT"
declare -A ALLOWED=(
  [utils/core]="utils/core"
  [models]="utils/core models"
  [data]="utils/core data"
  [utils/viz]="utils/core utils/viz"
  [utils/eval]="utils/core models data utils/viz utils/eval yolo/detector.h"
  [utils/export]="utils/core models data utils/viz utils/eval utils/export yolo/detector.h"
  [utils/distributed]="utils/core models utils/distributed"
  [utils/engine]="utils/core models data utils/viz utils/eval utils/distributed utils/engine
                  yolo/detector.h yolo/train.h"
  [utils/command]="utils/core models data utils/viz utils/eval utils/export utils/distributed
                   utils/engine utils/command yolo/detector.h yolo/train.h"
  [apps]="utils/core models data utils/viz utils/eval utils/export utils/distributed utils/engine
          utils/command yolo/detector.h yolo/train.h"
)
bad=0
for layer in "${!ALLOWED[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    ok=0
    for a in ${ALLOWED[$layer]}; do
      [[ "$inc" == "$a/"* || "$inc" == "$a" ]] && ok=1
    done
    # A subfolder of apps/ may include its own headers only.
    [[ "$layer" == apps && "$inc" == "$(dirname "$file")/"* ]] && ok=1
    if ((!ok)); then
      echo "$file includes $inc: $layer may include only from ${ALLOWED[$layer]}"
      bad=1
    fi
  done < <(grep -rHE '^#include "[a-z_]+/' --include='*.h' --include='*.cpp' "$layer" || true)
done
# forbid DIR PATTERN WHY: no file in DIR (not its subfolders when DIR is utils/core) includes a
# header matching PATTERN.
forbid() {
  local dir=$1 pattern=$2 why=$3 depth=()
  [[ $dir == utils/core ]] && depth=(-maxdepth 1)
  while IFS= read -r f; do
    while IFS= read -r inc; do
      echo "$f includes $inc: $why"
      bad=1
    done < <(grep -oE "^#include \"$pattern[^\"]*\"" "$f" | sed -E 's/#include "(.*)"/\1/')
  done < <(find "$dir" "${depth[@]}" \( -name '*.h' -o -name '*.cpp' \) | sort)
}
forbid utils/core 'utils/core/(io|runtime)/' "the foundation of utils/core uses no file format or runtime"
forbid utils/core/io 'utils/core/runtime/' "utils/core/io does not use utils/core/runtime"
forbid utils/core/runtime 'utils/core/io/' "utils/core/runtime does not use utils/core/io"
forbid apps/val 'utils/engine/' "val uses no training library (utils/distributed only to share a validation over ranks)"
forbid apps/detect 'utils/(engine|distributed)/' "detect uses no training library"
forbid apps/export 'utils/(engine|distributed)/' "export uses no training library"
while IFS= read -r line; do
  echo "$line: a public header includes only system, LibTorch or OpenCV headers"
  bad=1
done < <(grep -rHnE '^#include "' include || true)
for f in $(find utils -maxdepth 1 -name '*.h' -o -maxdepth 1 -name '*.cpp'); do
  echo "$f: sources belong in a layer's folder (utils/core, viz, eval, export, distributed or engine)"
  bad=1
done
((bad == 0)) || { echo "FAIL: includes against the layer order"; exit 1; }
echo "layers ok: core -> models, data -> viz -> eval -> export, distributed -> engine -> apps"
