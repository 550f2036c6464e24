#!/usr/bin/env bash
# The image's own checks, behind `apptainer test llada.sif`: Apptainer.def's %test runs this script, and the
# Dockerfile links it as /.singularity.d/test, which a .sif built from the docker archive keeps. Does this
# image work on this node? No GPU is needed; where one is visible (`apptainer test --nv llada.sif` on a GPU
# node) it is checked too, with what the image claims (LLADA_BENCH_IMAGE_CLAIMS) run on it.
# Prints one line per check; exits 1 when any failed.
set -uo pipefail

ENTRY="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/entrypoint.sh"
failed=()
check() {  # check NAME COMMAND...: run it through the entry point, as the image runs every command
    local name="$1" out
    shift
    if out="$("$ENTRY" "$@" 2>&1)"; then
        echo "ok    $name"
    else
        echo "FAIL  $name"
        tail -n 5 <<<"$out" | sed 's/^/      /'
        failed+=("$name")
    fi
}

# shellcheck disable=SC2016  # expanded by the entry point's shell, after it has set HOME and the caches
check "entry point: a writable HOME and caches for uid $(id -u)" bash -c 'test -w "$HOME" && test -w "$XDG_CACHE_HOME"'
check "stack: torch, transformers, ray, polars and the project import" \
    python -c 'import torch, transformers, ray, polars, orchestrator.cli, workers.runner, report.document.render'
check "image: what it claims, without a device (llada-bench env --require-image --no-device)" \
    llada-bench env --require-image --no-device
check "menu: just lists the image's recipes" bash -c 'just --list | grep -q "^ *sweep "'
check "default spec: plans, its models are in the image (llada-bench plan)" llada-bench plan
if nvidia-smi -L >/dev/null 2>&1; then
    check "GPU: $(nvidia-smi -L | head -n 1): CUDA and what the image claims (llada-bench env --require-image --require cuda)" \
        llada-bench env --require-image --require cuda
else
    echo "--    GPU: none visible, not checked (on a GPU node: apptainer test --nv llada.sif)"
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "image check: ${#failed[@]} failed: ${failed[*]}" >&2
    exit 1
fi
echo "image check: all passed"
