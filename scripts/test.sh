#!/usr/bin/env bash
# Sets up (Debian packages), builds, and runs every test through ctest.
# Usage: scripts/test.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd "${BUILD_DIR:-build}"
ctest -j"$(nproc)" --output-on-failure --timeout 600 "$@"
