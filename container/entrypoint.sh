#!/usr/bin/env bash
# The image's entry point: run the given command where the caller is; with none, show the recipes.
#
# The command runs in the caller's directory: under Apptainer the one `apptainer run` was typed in (the image
# itself is read-only), under docker/podman the image's WORKDIR (/opt/llada-bench, where the artifacts
# directory is bound) or `-w`. So `just sweep` writes ./artifacts/<sweep> there; spec, data and model paths not
# found there are read from the image's project (specs/paths.py), and the image's menu runs its tests there.
#
# Any uid can run the image (Apptainer runs as the caller on a read-only image; `docker run --user` gives a
# uid with no passwd entry and HOME=/). Ray (~/.ray), Triton (~/.triton), matplotlib, torch's inductor cache
# (/tmp/torchinductor_$USER, which asks the passwd database for $USER), hypothesis and transformers (a
# checkpoint's own code goes to $HF_HOME/modules) all write somewhere, so
# when HOME is not a writable directory it moves to a fresh one under the temp dir, and every cache goes under
# $XDG_CACHE_HOME. A variable the caller set is kept.
set -euo pipefail

writable() { [ -n "$1" ] && [ -d "$1" ] && [ -w "$1" ] && [ -x "$1" ]; }

if [ "${HOME:-/}" = / ] || ! writable "$HOME"; then
    home=""
    for base in "${TMPDIR:-}" /tmp /dev/shm; do
        if writable "$base"; then
            home="$(mktemp -d "$base/llada-bench-home.$(id -u).XXXXXX")"
            break
        fi
    done
    if [ -z "$home" ]; then
        echo "entrypoint: HOME (${HOME:-unset}) is not writable and neither is any temp dir;" \
            "bind a writable directory and set HOME to it" >&2
        exit 1
    fi
    export HOME="$home"
fi
if ! writable "${TMPDIR:-/tmp}"; then
    export TMPDIR="$HOME/tmp"  # Ray's temp dir follows TMPDIR (its sockets live there)
    mkdir -p "$TMPDIR"
fi
# getpass.getuser() (torch's caches) fails for a uid without a passwd entry unless USER or LOGNAME is set.
if [ -z "${USER:-}" ] && ! USER="$(id -un 2>/dev/null)"; then
    USER="uid$(id -u)"  # `id -un` printed the bare number and failed
fi
export USER LOGNAME="${LOGNAME:-$USER}"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}"
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$XDG_CACHE_HOME/triton}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$XDG_CACHE_HOME/torchinductor}"
export TORCH_HOME="${TORCH_HOME:-$XDG_CACHE_HOME/torch}"
export MPLCONFIGDIR="${MPLCONFIGDIR:-$XDG_CACHE_HOME/matplotlib}"
export HYPOTHESIS_STORAGE_DIRECTORY="${HYPOTHESIS_STORAGE_DIRECTORY:-$XDG_CACHE_HOME/hypothesis}"
# A checkpoint's own code (trust_remote_code) is copied into $HF_HOME/modules before it runs; the HF cache is
# often bound read-only, or not bound at all on a read-only image.
if [ -z "${HF_MODULES_CACHE:-}" ] && ! writable "${HF_HOME:-/hf-cache}"; then
    export HF_MODULES_CACHE="$XDG_CACHE_HOME/huggingface/modules"
    mkdir -p "$HF_MODULES_CACHE"
fi
mkdir -p "$XDG_CACHE_HOME" "$XDG_CONFIG_HOME" "$TRITON_CACHE_DIR" "$TORCHINDUCTOR_CACHE_DIR" "$TORCH_HOME" \
    "$MPLCONFIGDIR"

if [ "$#" -eq 0 ]; then
    exec just --list --unsorted
fi
exec "$@"
