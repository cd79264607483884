#!/usr/bin/env bash
# Installs every Debian package the project needs, then configures and builds into build/.
# Idempotent: packages already present are not reinstalled, and the build is incremental.
# Usage: scripts/setup.sh [--no-build] [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git curl unzip zip python3
  libtorch-dev libgloo-dev python3-torch
  libopencv-dev
  libyaml-cpp-dev libcxxopts-dev libgtest-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0

BUILD_DIR=${BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
