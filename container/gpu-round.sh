#!/usr/bin/env bash
# One GPU round from one bundle, no edits: the device tests, then the decode profile, then
# specs/campaign-graphs.yaml, in resumable calls of at most 9 minutes (orchestrator/gpu_round.py). Each call
# resumes from the round folder's state.json and ends by writing gpu-round.json there: every goal met or missed,
# with its figure. Carry the folder to the next call (--export DIR packs it into DIR/gpu-round.tar.gz).
# usage: container/gpu-round.sh [--dry-run] [--bundle DIR] [--round DIR] [--budget SECONDS] [--export DIR] [--goals]
# exit: 0 the round is complete, 3 run it again to continue, 1 a piece could not run, 2 usage or environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${LLADA_GPU_BUNDLE:-}
python=${PYTHON:-python3}
round=artifacts/gpu-round
export_dir=""
args=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --dry-run) exec env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$python" -m orchestrator.gpu_round --dry-run ;;
        --bundle) bundle=$2; shift 2 ;;
        --round) round=$2; shift 2 ;;
        --export) export_dir=$2; shift 2 ;;
        --budget) args+=(--budget "$2"); shift 2 ;;
        --goals) args+=(--goals); shift ;;
        *) echo "error: unknown argument $1; allowed: --dry-run, --bundle, --round, --budget, --export, --goals" >&2; exit 2 ;;
    esac
done

# shellcheck source=container/gpu-env.sh
. container/gpu-env.sh

status=0
"$python" -m orchestrator.gpu_round --round "$round" ${bundle:+--bundle "$bundle"} "${args[@]}" || status=$?
if [ -n "$export_dir" ] && [ -d "$round" ]; then
    mkdir -p "$export_dir"
    tar -czf "$export_dir/gpu-round.tar.gz" -C "$(dirname "$round")" "$(basename "$round")"
    echo "packed $round into $export_dir/gpu-round.tar.gz: unpack it where the next call runs (tar -xzf ... -C $(dirname "$round"))"
fi
exit "$status"
