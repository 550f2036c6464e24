#!/usr/bin/env bash
# Run a campaign on one offline GPU machine: the spec's runs inline (no Ray), resumable, then the sweep
# directory packed into one tarball for `just figures` elsewhere. Installs nothing from the network: with
# --bundle DIR (made by container/gpu-bundle.sh) it unpacks the wheels whose modules this Python lacks into
# build/gpu-site. Run it again with the sweep directory in place and it resumes, so a campaign splits into
# commands shorter than a lease's limit: --budget starts no run predicted to end after that many seconds.
# usage: container/gpu-campaign.sh [SPEC] [--bundle DIR] [--out DIR] [--tarball FILE] [--budget SECONDS]
# exit: 0 every run done, 1 some runs failed (artifacts say why), 3 stopped at the budget: run it again.
set -euo pipefail
cd "$(dirname "$0")/.."

spec=specs/campaign-h100.yaml
bundle=${LLADA_GPU_BUNDLE:-}
out=""
tarball=""
budget=${LLADA_CAMPAIGN_BUDGET_S:-480}
python=${PYTHON:-python3}
while [ "$#" -gt 0 ]; do
    case "$1" in
        --bundle) bundle=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --tarball) tarball=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        -*) echo "error: unknown option $1; allowed: --bundle, --out, --tarball, --budget" >&2; exit 2 ;;
        *) spec=$1; shift ;;
    esac
done

# shellcheck source=container/gpu-env.sh
. container/gpu-env.sh

name=$("$python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["name"])' "$spec")
out=${out:-artifacts/$name}
tarball=${tarball:-$out.tar.gz}

"$python" -m orchestrator.cli plan "$spec" | tail -n 1
status=0
"$python" -m orchestrator.cli sweep "$spec" --executor inline --out "$out" --no-report --stop-after "$budget" || status=$?
if [ -d "$out" ]; then
    mkdir -p "$(dirname "$tarball")"
    tar -czf "$tarball" -C "$(dirname "$out")" "$(basename "$out")"
    echo "packed $out into $tarball ($(du -h "$tarball" | cut -f1)); figures elsewhere: tar -xzf it into artifacts/, then just figures $out"
fi
if [ "$status" -eq 3 ]; then
    echo "stopped before the budget ran out: run the same command again to continue" >&2
fi
exit "$status"
