#!/usr/bin/env bash
# Build the image and run it the way Apptainer would, on a machine with no GPU and no container registry:
# only Debian's mirrors and PyPI. `just image-test` runs this; CI runs it after the test suite.
#
#   1. engine   podman, buildah, runc, debootstrap, uidmap from Debian's packages where missing
#   2. base     a Debian base image made with debootstrap (no base image can be pulled), reused for a week
#   3. runtime  the OCI runtime and ulimits this host allows (crun may refuse the cgroup layout; podman's
#               default rlimits can exceed the host's hard limits, which fails with EPERM)
#   4. build    the project's Dockerfile, --build-arg VARIANT=registry, --format docker (keeps SHELL and
#               HEALTHCHECK); podman's layer cache makes a rebuild with an unchanged lock quick
#   5. sweep    `just sweep` with no network, as a uid that is neither the image's user nor in its passwd,
#               read-only root, a writable HOME bind; then `llada-bench verify` on what it wrote
#   6. tests    the image's own fast tests, same conditions: by default the files that check the image and its
#               stack (recipes, entry point, environment, lock, samplers and compiled decode on torch 2.7.1),
#               about 130 tests; --all-tests runs the whole fast suite (-m "not slow", several times longer)
# Each stage prints its time. Needs root (podman as root, debootstrap, apt-get).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: container/image-test.sh [--tests PATHS | --all-tests | --no-tests] [--no-sweep] [--tag TAG] [--cache DIR]
  --tests PATHS  the in-image test files, space-separated (default: the files that check the image, below)
  --all-tests    the whole fast suite (tests/, -m "not slow") instead
  --no-tests     skip the in-image tests
  --no-sweep     skip the in-image sweep
  --tag TAG      image tag (default: localhost/llada-bench:registry)
  --cache DIR    where the script keeps its working folders (default /var/cache/llada-bench): the base's
                 rootfs while it is made, and image-test.run/ with the run's home, artifacts and logs, a
                 folder it made and marked as its own; nothing else in DIR is touched
Environment: DEBIAN_SUITE (trixie), DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR (default: the host's own apt
sources, the archive this machine already installs from), BASE_MAX_AGE_DAYS (7),
RUN_UID (4242: any uid that is not the image's 10001 and has no passwd entry in it).
EOF
}

# The Debian archive this host's apt already uses (deb822 .sources or one-line .list): KIND "security" takes
# the URI serving the -security suite, "main" the first other one. APT_ROOT prefixes /etc (tests).
host_debian_uri() {
    local kind="$1" files=()
    local etc="${APT_ROOT:-}/etc/apt"
    for f in "$etc/sources.list" "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ "${#files[@]}" -gt 0 ] || return 0
    awk -v kind="$kind" '
        function pick(uri, suites) { if (!found && uri != "" && (suites ~ /-security/) == (kind == "security")) { print uri; found = 1 } }
        function stanza() { if (suites != "") pick(uri, suites); uri = ""; suites = "" }
        FNR == 1 { stanza() }
        /^[[:space:]]*#/ { next }
        /^deb[[:space:]]/ { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } pick($i, $(i + 1)); next }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { suites = $0 }
        /^[[:space:]]*$/ { stanza() }
        END { stanza() }' "${files[@]}"
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTS="tests/test_container.py tests/test_env_command.py tests/test_constraints.py tests/test_llada_sampler.py
tests/test_ar_sampler.py tests/test_cache_written.py tests/test_compiled_decode.py"
RUN_TESTS=1
RUN_SWEEP=1
TAG=localhost/llada-bench:registry
CACHE=/var/cache/llada-bench
SUITE="${DEBIAN_SUITE:-trixie}"
MIRROR="${DEBIAN_MIRROR:-}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-}"
MAX_AGE_DAYS="${BASE_MAX_AGE_DAYS:-7}"
RUN_UID="${RUN_UID:-4242}"
IMAGE_UID=10001
# The image's label (Dockerfile, Apptainer.def): pruning is limited to images that carry it.
PROJECT_LABEL=org.opencontainers.image.title=llada-bench
OWN_MARK=.made-by-llada-bench-image-test  # the file that marks a folder under --cache as this script's

while [ "$#" -gt 0 ]; do
    case "$1" in
        --tests) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; TESTS="$2"; shift 2 ;;
        --all-tests) TESTS=tests; shift ;;
        --no-tests) RUN_TESTS=0; shift ;;
        --no-sweep) RUN_SWEEP=0; shift ;;
        --tag) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; TAG="$2"; shift 2 ;;
        --cache) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; CACHE="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "image-test: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if ! [[ "$RUN_UID" =~ ^[0-9]+$ ]] || [ "$RUN_UID" -eq 0 ] || [ "$RUN_UID" -eq "$IMAGE_UID" ]; then
    echo "image-test: RUN_UID must be a number other than 0 and the image's $IMAGE_UID" >&2
    exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "image-test: run as root (podman as root, debootstrap and apt-get need it)" >&2
    exit 2
fi

# shellcheck source=container/stages.sh
. "$ROOT/container/stages.sh"
TOTAL_START="$(date +%s)"

# ---------------------------------------------------------------- 1. engine
stage engine
missing=()
for pair in podman:podman buildah:buildah runc:runc debootstrap:debootstrap newuidmap:uidmap; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]} from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
podman --version

# ---------------------------------------------------------------- 2. base
stage base
mkdir -p "$CACHE"
base=""
cutoff="$(date -u -d "-$MAX_AGE_DAYS days" +%Y%m%d)"
while read -r tag; do
    stamp="${tag##*:"$SUITE"-}"
    if [[ "$stamp" =~ ^[0-9]{8}$ ]] && [ "$stamp" -ge "$cutoff" ]; then
        base="$tag"
        break
    fi
done < <(podman images --format '{{.Repository}}:{{.Tag}}' --filter reference="localhost/llada-base:$SUITE-*" | sort -r)
if [ -n "$base" ]; then
    echo "reusing $base (younger than $MAX_AGE_DAYS days)"
else
    base="localhost/llada-base:$SUITE-$(date -u +%Y%m%d)"
    work="$(mktemp -d "$CACHE/base-$SUITE.XXXXXX")"  # made here, so removed here
    trap 'rm -rf "$work"' EXIT
    rootfs="$work/rootfs"
    [ -n "$MIRROR" ] || MIRROR="$(host_debian_uri main)"
    [ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR="$(host_debian_uri security)"
    if [ -z "$MIRROR" ] || [ -z "$SECURITY_MIRROR" ]; then
        echo "error: no Debian archive in this host's apt sources; set DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR" >&2
        exit 2
    fi
    echo "debootstrap $SUITE from $MIRROR"
    debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
        tail -n 20 "$work/debootstrap.log" >&2
        exit 1
    }
    cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
    rm -rf "$work"
    trap - EXIT
    echo "made $base"
fi

# ---------------------------------------------------------------- 3. runtime
stage runtime
# Try the default runtime, then runc; lower nofile/nproc (from the host's hard limits) while a start fails
# setting that rlimit (runc's "error setting rlimit type 7" is RLIMIT_NOFILE, 6 is RLIMIT_NPROC).
hard() { local v; v="$(ulimit "-H$1")"; [ "$v" = unlimited ] && v=1048576; echo "$v"; }
RUNTIME_FLAGS=()
for runtime in "" runc; do
    nofile="$(hard n)"
    nproc="$(hard u)"
    for _ in $(seq 24); do
        flags=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
        if [ -n "$runtime" ]; then flags=(--runtime "$runtime" "${flags[@]}"); fi
        if err="$(podman run --rm --network none "${flags[@]}" "$base" true 2>&1)"; then
            RUNTIME_FLAGS=("${flags[@]}")
            break 2
        fi
        case "$err" in
            *"rlimit type 7"*) nofile=$((nofile / 2)) ;;
            *"rlimit type 6"*) nproc=$((nproc / 2)) ;;
            *) break ;;
        esac
    done
    echo "runtime ${runtime:-default} cannot start a container here: ${err##*$'\n'}"
done
if [ "${#RUNTIME_FLAGS[@]}" -eq 0 ]; then
    echo "image-test: no OCI runtime could start a container" >&2
    exit 1
fi
echo "podman flags: ${RUNTIME_FLAGS[*]}"

# ---------------------------------------------------------------- 4. build
stage build
cd "$ROOT"
# The host's CA bundle, bound for the build's downloads only: where a TLS-intercepting proxy sits between this
# host and PyPI, only the host's bundle holds its CA (install-stack.sh uses the bundle when it is there).
BUILD_FLAGS=()
for bundle in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [ -s "$bundle" ]; then
        BUILD_FLAGS+=(--volume "$(readlink -f "$bundle"):/run/host-ca.crt:ro")
        echo "the build's downloads trust the host's CA bundle $bundle"
        break
    fi
done
podman build --format docker "${RUNTIME_FLAGS[@]}" "${BUILD_FLAGS[@]}" \
    --build-arg VARIANT=registry \
    --build-arg DEBIAN_BASE="$base" \
    --build-arg IMAGE_ID="$(container/image-id.sh)" \
    --build-arg GIT_COMMIT="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --tag "$TAG" .
podman image inspect --format 'image {{.Id}}: {{.Size}} bytes' "$TAG"
# Earlier builds' images, now untagged, would fill the disk a few GB per changed lock; the current one's
# layers stay cached. Only this project's: other dangling images on the host are not this script's to remove.
podman image prune --force --filter "label=$PROJECT_LABEL" >/dev/null
# --format docker keeps what the OCI format drops: SHELL and HEALTHCHECK (podman shows the latter).
config="$(podman image inspect --format '{{.ManifestType}} {{json .HealthCheck}}' "$TAG")"
case "$config" in
    application/vnd.docker.*llada-bench*) ;;
    *) echo "image-test: not a docker-format image with its HEALTHCHECK ($config)" >&2; exit 1 ;;
esac

# ---------------------------------------------------------------- 5. sweep and 6. tests
# Apptainer's conditions: any uid, read-only image, HOME bound writable, the sweep's output bound; no network.
# --passwd=false: podman would otherwise add the uid to the container's /etc/passwd (docker does not).
# The run's folder is made afresh each time, and only when something runs: the one a previous run made is
# replaced (it bears the mark), anything else of that name is refused.
RUN="$CACHE/image-test.run"
if [ "$RUN_SWEEP" -eq 1 ] || [ "$RUN_TESTS" -eq 1 ]; then
    if [ -e "$RUN" ] || [ -L "$RUN" ]; then
        if [ -L "$RUN" ] || [ ! -f "$RUN/$OWN_MARK" ]; then
            echo "image-test: $RUN exists and was not made by this script; move it or choose another --cache" >&2
            exit 2
        fi
        rm -rf "$RUN"
    fi
    mkdir "$RUN"
    touch "$RUN/$OWN_MARK"
    mkdir "$RUN/home" "$RUN/artifacts"
    chown "$RUN_UID:$RUN_UID" "$RUN/home" "$RUN/artifacts"
fi
# Ray's object store wants /dev/shm to hold 30% of the memory (podman's default is 64 MB); the health check
# needs systemd timers, which this kind of host lacks, and is not what this run tests.
shm_kb="$(awk '/^MemTotal:/ { print int($2 * 0.32) }' /proc/meminfo)"
in_image() {
    podman run --rm --network none --read-only --user "$RUN_UID:$RUN_UID" --shm-size "${shm_kb}k" \
        --passwd=false --no-healthcheck "${RUNTIME_FLAGS[@]}" \
        --volume "$RUN/home:/home/runner" --env HOME=/home/runner \
        --volume "$RUN/artifacts:/opt/llada-bench/artifacts" \
        "$TAG" "$@"
}
summary=()
if [ "$RUN_SWEEP" -eq 1 ]; then
    stage sweep
    in_image bash -c 'just sweep && llada-bench verify artifacts/smoke' 2>&1 | tee "$RUN/sweep.log"
    finished="$(grep -E '^finished [0-9]+ runs' "$RUN/sweep.log" | tail -n 1)"  # finished N runs (K ok) in ...
    ok="$(grep -oE '[0-9]+ ok' <<<"$finished" | cut -d ' ' -f 1)"
    summary+=("sweep in the image: ${ok:-0}/$(cut -d ' ' -f 2 <<<"$finished") ok")
    summary+=("$(grep -E ': verified \(' "$RUN/sweep.log" | tail -n 1)")
fi
if [ "$RUN_TESTS" -eq 1 ]; then
    stage tests
    read -r -a test_paths <<<"$(tr '\n' ' ' <<<"$TESTS")"
    in_image python -m pytest -q -p no:cacheprovider -m "not slow" "${test_paths[@]}" 2>&1 | tee "$RUN/tests.log"
    summary+=("tests in the image: $(tail -n 1 "$RUN/tests.log")")
fi
stage ""

echo "== image-test: $TAG"
for line in "${summary[@]}"; do echo "   $line"; done
for line in "${TIMES[@]}"; do echo "   $line"; done
echo "   total    $(($(date +%s) - TOTAL_START))s"
