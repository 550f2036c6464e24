#!/usr/bin/env bash
# Install the image's pinned stack. Dockerfile and Apptainer.def both run this script, so both images get
# exactly the same thing from the same pins (container/stack.env) and the same lock (requirements.lock).
#   install-stack.sh deps      system certificates, uv, CPython, /opt/venv from container/requirements.lock
#   install-stack.sh project   the project itself, editable, without dependencies (they came from the lock)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT="$(dirname "$HERE")"
VENV=/opt/venv
# shellcheck source=container/stack.env
. "$HERE/stack.env"
# Managed CPython under /opt (not root's home) so any user of an Apptainer image can run it.
export UV_PYTHON_INSTALL_DIR=/opt/python UV_NO_CACHE=1 UV_PYTHON_PREFERENCE=only-managed

deps() {
    # curl and unzip fetch uv's PyPI wheel; they are the only system packages the stack needs.
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends ca-certificates curl unzip
    rm -rf /var/lib/apt/lists/*

    local wheel=/tmp/uv.whl
    curl -fsSL --retry 5 -o "$wheel" "$UV_WHEEL_URL"
    echo "$UV_WHEEL_SHA256  $wheel" | sha256sum --check --strict -
    unzip -p "$wheel" "uv-${UV_VERSION}.data/scripts/uv" > /usr/local/bin/uv
    chmod 0755 /usr/local/bin/uv
    rm -f "$wheel"

    uv python install "$PYTHON_VERSION"
    uv venv --python "$PYTHON_VERSION" "$VENV"
    # Every distribution is checked against the lock's sha256 and must be a wheel (no source builds).
    uv pip install --python "$VENV/bin/python" --require-hashes --no-deps --no-build \
        --requirement "$HERE/requirements.lock"
    chmod -R a+rX /opt/python "$VENV"
}

project() {
    # setuptools is in the lock, so nothing unhashed is fetched to build the project.
    uv pip install --python "$VENV/bin/python" --no-deps --no-build-isolation --editable "$PROJECT"
    uv pip check --python "$VENV/bin/python"
    find "$PROJECT" -name __pycache__ -prune -exec rm -rf {} +
    # Bind points: the HF cache and the sweep output (both writable for whichever user runs the image).
    mkdir -p /hf-cache "$PROJECT/artifacts"
    chmod 1777 /hf-cache "$PROJECT/artifacts"
}

case "${1:-}" in
    deps) deps ;;
    project) project ;;
    *) echo "usage: $0 deps|project" >&2; exit 2 ;;
esac
