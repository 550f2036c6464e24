#!/usr/bin/env bash
# One GPU round from one bundle, no edits (orchestrator/gpu_round/run.py, the plan in orchestrator/gpu_round/plan.py): its
# first call the 8B headline (the graph tests, then LLaMA-3-8B against LLaDA-8B at batch 1 in 3 interleaved
# sessions), then what the lease leaves (batch 8 and 64, eager at batch 8, Dream-7B against Qwen2.5-7B, the other
# device tests), each started only if it fits before the call's deadline (this script's start + --budget, 540 s
# by default) and packed into --export DIR the moment it ends. Give the next call that export with --resume DIR:
# it goes on, on this machine or a fresh one, without redoing what ended. --toy runs the first call at toy shapes
# on this CPU. docs/gpu-leases.md has the calls; `just headline-results DIR` commits the headline.
# usage: container/gpu-round.sh [--dry-run | --goals | --toy] [--bundle DIR] [--round DIR] [--budget SECONDS]
#                               [--export DIR] [--resume DIR]
# exit: 0 the round is complete, 3 call again to continue, 1 a piece could not run, 2 a bad argument, file or
# environment (no CUDA), one line naming it.
set -euo pipefail
since=$(date +%s.%N)  # the deadline counts from here
caller=$PWD
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
for arg in "$@"; do  # the help goes to the terminal, not into `checked` below
    case $arg in -h | --help) PYTHONPATH="$PWD" exec "$python" -m orchestrator.gpu_round.args --cwd "$caller" --help ;; esac
done
# Every argument is checked first (standard library only: before the bundle is unpacked); prints the mode and
# the bundle folder.
checked=$(PYTHONPATH="$PWD" "$python" -m orchestrator.gpu_round.args --cwd "$caller" "$@") || exit 2
mode=${checked%%$'\n'*}
bundle=${checked#*$'\n'}
if [ "$mode" = dry-run ]; then
    exec env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$python" -m orchestrator.gpu_round.run --cwd "$caller" "$@"
fi
# shellcheck source=container/gpu-env.sh
. container/gpu-env.sh
exec "$python" -m orchestrator.gpu_round.run --since "$since" --cwd "$caller" "$@"
