#!/usr/bin/env bash
# The image's entry point: run the given command in the project directory; with none, show the recipes.
set -euo pipefail
cd "${LLADA_BENCH_HOME:-/opt/llada-bench}"
if [ "$#" -eq 0 ]; then
    exec just --list --unsorted
fi
exec "$@"
