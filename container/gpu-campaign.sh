#!/usr/bin/env bash
# Run a campaign on one offline GPU machine: the spec's runs inline (no Ray), resumable, then the sweep
# directory packed into one tarball for `just figures` elsewhere. Installs nothing from the network: with
# --bundle DIR (made by container/gpu-bundle.sh) it unpacks the wheels whose modules this Python lacks into
# build/gpu-site. Run it again with the sweep directory in place and it resumes, so a campaign splits into
# commands shorter than a lease's limit: --budget starts no run predicted to end after that many seconds.
# Nothing of yours is packed or replaced: it packs only a folder that `llada-bench verify` passes after the
# sweep, never / or $HOME, into a new tarball or one it packed before from the same sweep (--replace-tarball
# to replace any other file). Relative paths are taken from the directory you run it in.
# usage: container/gpu-campaign.sh [SPEC] [--bundle DIR] [--out DIR] [--tarball FILE] [--budget SECONDS]
#                                  [--replace-tarball]
# exit: 0 every run done, 1 some runs failed (artifacts say why), 2 a bad argument or a refused folder (one
# line says which), 3 stopped at the budget: run it again.
set -euo pipefail

fail() {
    echo "error: $*" >&2
    exit 2
}

# A path as the caller meant it: relative to the directory the command was run in (this script moves to
# the project root below).
from_caller() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$PWD/$1" ;;
    esac
}

spec=specs/campaign-h100.yaml
bundle=${LLADA_GPU_BUNDLE:-}
budget_from=LLADA_CAMPAIGN_BUDGET_S
budget=${LLADA_CAMPAIGN_BUDGET_S:-480}
out=""
tarball=""
replace=0
python=${PYTHON:-python3}
while [ "$#" -gt 0 ]; do
    case "$1" in
        --bundle | --out | --tarball | --budget)
            if [ "$#" -lt 2 ] || [ -z "$2" ] || [[ "$2" == --* ]]; then
                fail "$1 needs a value (usage: container/gpu-campaign.sh [SPEC] [--bundle DIR] [--out DIR] [--tarball FILE] [--budget SECONDS])"
            fi
            case "$1" in
                --bundle) bundle=$(from_caller "$2") ;;
                --out) out=$(from_caller "$2") ;;
                --tarball) tarball=$(from_caller "$2") ;;
                --budget) budget=$2 budget_from=--budget ;;
            esac
            shift 2 ;;
        --replace-tarball) replace=1; shift ;;
        -*) fail "unknown option $1; allowed: --bundle, --out, --tarball, --budget, --replace-tarball" ;;
        *)
            # a spec as given, else one of the package's own (specs/...), as llada-bench resolves it
            if [ -e "$1" ]; then spec=$(from_caller "$1"); else spec=$1; fi
            shift ;;
    esac
done

# A budget is a finite number of seconds above zero (nan, inf, negatives and words are refused here, by name).
if ! [[ "$budget" =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ "$budget" =~ ^0+([.]0+)?$ ]]; then
    fail "$budget_from $budget: not a number of seconds above 0; give e.g. --budget 480"
fi
if [ -n "$bundle" ] && [ ! -d "$bundle" ]; then
    fail "--bundle $bundle: no such directory; make one with container/gpu-bundle.sh DIR"
fi
if [ -n "$bundle" ] && [ ! -d "$bundle/wheels" ]; then
    fail "--bundle $bundle: holds no wheels/ folder, so it is not a bundle; make one with container/gpu-bundle.sh DIR"
fi

cd "$(dirname "$0")/.."
# shellcheck source=container/gpu-env.sh
. container/gpu-env.sh

# The spec is checked (one line on any problem: missing, a FIFO, malformed) before anything else runs.
"$python" -m orchestrator.cli plan "$spec" | tail -n 1
name=$("$python" -c 'import sys; from specs.loader import load_spec; print(load_spec(sys.argv[1]).name)' "$spec")
out=${out:-$PWD/artifacts/$name}
tarball=${tarball:-$out.tar.gz}

# Never pack / or a home directory, nor anything that holds one: a sweep's folder is its own.
real_out=$(realpath -m -- "$out")
for forbidden in / "${HOME:-/}"; do
    real_forbidden=$(realpath -m -- "$forbidden")
    if [ "$real_out" = "$real_forbidden" ] || [[ "$real_forbidden/" == "$real_out"/* ]]; then
        fail "--out $out: is $forbidden or holds it; a campaign writes into a folder of its own, e.g. artifacts/$name"
    fi
done
real_tarball=$(realpath -m -- "$tarball")
if [[ "$real_tarball" == "$real_out"/* ]]; then
    fail "--tarball $tarball: is inside the sweep folder $out; put it beside it"
fi

# Whether FILE is a tarball this script packed from this sweep before (every entry under <name>/, with its
# checksum record): such a file is replaced, any other only with --replace-tarball.
packed_here() {
    local top
    top=$(basename -- "$out")
    [ -f "$1" ] && [ ! -L "$1" ] || return 1
    tar -tzf "$1" 2>/dev/null | awk -v top="$top/" -v record="$top/checksums.jsonl" '
        index($0, top) != 1 && $0 != substr(top, 1, length(top) - 1) { stranger = 1 }
        $0 == record { found = 1 }
        END { exit !(found && !stranger) }'
}
refuse_tarball() {
    if [ -L "$tarball" ] || { [ -e "$tarball" ] && [ ! -f "$tarball" ]; }; then
        fail "--tarball $tarball: exists and is not a regular file; give a new file name"
    fi
    if [ -e "$tarball" ] && [ "$replace" -eq 0 ] && ! packed_here "$tarball"; then
        fail "--tarball $tarball: exists and is not a pack of this sweep; give a new name, or --replace-tarball to replace it"
    fi
}
refuse_tarball  # before the campaign runs: a refusal costs nothing

status=0
"$python" -m orchestrator.cli sweep "$spec" --executor inline --out "$out" --no-report --stop-after "$budget" || status=$?
if [ "$status" -eq 2 ]; then
    echo "not packed: the sweep refused or stopped with an error (above); nothing was packed or replaced" >&2
    exit 2
fi
# Pack only what verifies as this sweep's: never a folder of yours, never a damaged one.
if ! "$python" -m orchestrator.cli verify "$out"; then
    echo "not packed: $out does not verify (\`llada-bench verify $out\` names why)" >&2
    exit 2
fi
refuse_tarball  # again: a file may have appeared there while the campaign ran
mkdir -p "$(dirname -- "$tarball")"
partial=$(mktemp --suffix=.partial "$tarball.XXXXXX")
trap 'rm -f -- "$partial"' EXIT
tar -czf "$partial" -C "$(dirname -- "$out")" -- "$(basename -- "$out")"
mv -f -- "$partial" "$tarball"
echo "packed $out into $tarball ($(du -h "$tarball" | cut -f1)); figures elsewhere: tar -xzf it into artifacts/, then just figures artifacts/$(basename -- "$out")"
if [ "$status" -eq 3 ]; then
    echo "stopped before the budget ran out: run the same command again to continue" >&2
fi
exit "$status"
