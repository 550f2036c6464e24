#!/usr/bin/env bash
# The tests that need a CUDA device (tests/gpu, marker gpu), on a machine with nothing but torch and
# transformers installed: with --bundle DIR the missing wheels (pydantic, pytest) are unpacked first.
# Under 5 minutes on one A100/H100. Anything after the options goes to pytest.
# usage: container/gpu-tests.sh [--bundle DIR] [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${LLADA_GPU_BUNDLE:-}
python=${PYTHON:-python3}
if [ "${1:-}" = "--bundle" ]; then
    bundle=$2
    shift 2
fi
# shellcheck source=container/gpu-env.sh
. container/gpu-env.sh
exec "$python" -m pytest tests/gpu -m gpu -p no:cacheprovider "$@"
