#!/usr/bin/env bash
# The image's identity, as every artifact records it (LLADA_BENCH_IMAGE): project version, the commit it
# was built from (marked -dirty when the tree has changes) and the first 12 hex digits of the lock's sha256.
# Both `just image-docker` and `just image-apptainer` pass it as the IMAGE_ID build argument.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
    commit="$commit-dirty"
fi
lock="$(sha256sum container/requirements.lock | cut -c1-12)"
echo "llada-bench:${version}+git.${commit}.lock.${lock}"
