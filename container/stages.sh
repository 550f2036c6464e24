# shellcheck shell=bash
# Stage timing for the long container scripts (image-test.sh, cluster-test.sh), sourced by them:
# `stage NAME` closes the running stage, printing its time, and opens the next (`stage ""` closes the last);
# TIMES keeps one line per closed stage for the closing summary.
TIMES=()
STAGE_NAME=""
STAGE_START=0
stage() {
    local now
    now="$(date +%s)"
    if [ -n "$STAGE_NAME" ]; then
        TIMES+=("$(printf '%-8s %5ss' "$STAGE_NAME" "$((now - STAGE_START))")")
        echo "== $STAGE_NAME: $((now - STAGE_START))s"
    fi
    STAGE_NAME="$1"
    STAGE_START="$now"
    if [ -n "$1" ]; then echo "== $1"; fi
}
