#!/usr/bin/env bash
# The ACCRE path as its users run it, on one Debian machine with no GPU: a real Apptainer and a real SLURM
# cluster of two nodes. `just cluster-test` runs it; CI runs it after `just image-test`, whose image it uses.
#
#   install  Apptainer from ../shared/apptainer/build-apptainer.sh where it is missing (configured for
#            unprivileged runs where this script installed it); slurmd, slurmctld, munge from Debian's packages
#   sif      build/llada.sif from the image `just image-test` built (`podman save`, then `apptainer build`),
#            reused while that image is unchanged, replaced only while it is the file this script built (its
#            stamp, build/llada.sif.image); `--sif PATH` tests that image as it is, never building or replacing it.
#            The build's peak on disk, beside the image itself, was 2.5x the image's size (the saved OCI
#            layout, Apptainer's copy of it, the unpacked tree, the squashfs: 20 GB for the 8.2 GB image); it
#            warns first where less than 3x is free. `--release-image` removes the image from podman's
#            storage once saved, which frees its size before the unpacking (CI passes it; `just image-test`
#            builds the image again)
#   cluster  munged, slurmctld and two slurmd (node1 and node2, each its own hostname and four fake A100s
#            declared as gres over character devices) in a network namespace of their own with no route out;
#            every name resolves to 127.0.0.1, and a check sees every socket listen there. Torn down at the
#            end, whatever happens.
#   a        as an unprivileged user, from an empty directory: `apptainer run build/llada.sif just sweep`
#            (every run ok, `verify` ok, results in ./artifacts/smoke); `just figures` under --cleanenv
#            --writable-tmpfs rewrites that report there; under --containall a sweep with no directory bound
#            refuses before it runs, and one with `--bind "$PWD" --pwd "$PWD"` runs specs/tiny.yaml
#   test     `apptainer test build/llada.sif` passes; with a claim the image cannot meet, it fails
#   b        `sbatch --wait container/accre.sbatch specs/smoke.yaml`: exit 0, `verify` ok
#   c        the same job stopped by its time limit (--time=4 --signal=B:TERM@120): exit 3 with its finished
#            runs kept, then the resubmission resumes them and completes
#   d        two nodes (--nodes=2, one fake A100 each) on specs/tiny.yaml: one Ray cluster across both inside
#            Apptainer, stopped with TERM part-way (exit 3, every node's Ray gone), then resubmitted: runs on
#            both nodes, each run once, the artifacts once where LLADA_ARTIFACTS says
# Each stage prints its time; the exit status is 0 only when every check passed. Needs root.
#   container/cluster-test.sh [--tag TAG] [--sif PATH] [--release-image] [--stages "a test b c d"]
#   (--stages runs only those checks, after install, sif and cluster: e.g. --stages d reruns the two nodes)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG=localhost/llada-bench:registry
SIF="$ROOT/build/llada.sif"
APPTAINER_PREFIX="${APPTAINER_PREFIX:-/usr/local/apptainer}"
RUN_USER="${CLUSTER_TEST_USER:-llada-ct}"
MADE_MARK="llada-bench cluster-test"  # the passwd comment of the user this script made
# mksquashfs's fastest gzip: a SIF any kernel mounts, built in a fraction of the default level's time (the
# image's files are the same; only the compression differs).
SQUASHFS_ARGS="${SQUASHFS_ARGS:--comp gzip -Xcompression-level 1}"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
ALL_STAGES="a test b c d"
STAGES="$ALL_STAGES"
inside=""
SIF_GIVEN=""
RELEASE_IMAGE=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --tag) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; TAG="$2"; shift 2 ;;
        --sif) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; SIF="$(realpath -m "$2")"; SIF_GIVEN=1; shift 2 ;;
        --stages) [ "$#" -ge 2 ] || { usage >&2; exit 2; }; STAGES="$2"; shift 2 ;;
        --release-image) RELEASE_IMAGE=1; shift ;;
        --inside) inside="$2"; shift 2 ;;  # the cluster's network namespace (internal)
        -h | --help) usage; exit 0 ;;
        *) echo "cluster-test: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
for name in $STAGES; do
    case " $ALL_STAGES " in
        *" $name "*) ;;
        *) echo "cluster-test: --stages: no stage '$name' (the stages: $ALL_STAGES)" >&2; exit 2 ;;
    esac
done
# space_warning BYTES: where the SIF build of an image of BYTES would need more than is free, one line a
# filesystem saying so. Shares of the image's size, measured on the 8.2 GB registry image: the OCI layout
# `podman save` writes 0.52 (in $SCRATCH); Apptainer's copy of it 0.52, the unpacked tree 0.97 and the squashfs
# 0.48 (in its temporary directory), rounded up to 2.0; the SIF 0.52 (beside $SIF). With --release-image the
# image's own size in podman's storage is freed before the unpacking.
space_warning() {
    local size="$1" fs need free
    local -A needs=()
    set -- "$SCRATCH" $(( size * 52 / 100 )) "${APPTAINER_TMPDIR:-${TMPDIR:-/tmp}}" $(( size * 2 )) \
        "$(dirname "$SIF")" $(( size * 52 / 100 ))
    if [ -n "$RELEASE_IMAGE" ]; then set -- "$@" "$(podman info --format '{{.Store.GraphRoot}}')" $(( -size )); fi
    while [ "$#" -ge 2 ]; do  # (a path, the bytes it takes there), summed by the filesystem that holds it
        fs="$(df --output=target "$1" | tail -n 1)"
        needs[$fs]=$(( ${needs[$fs]:-0} + $2 ))
        shift 2
    done
    for fs in "${!needs[@]}"; do
        need="${needs[$fs]}"
        free="$(df -B1 --output=avail "$fs" | tail -n 1)"
        if [ "$need" -gt "$free" ]; then
            echo "cluster-test: warning: the SIF build may need about $(( need / 1000000000 )) GB on $fs and" \
                "$(( free / 1000000000 )) GB is free: free some, set APPTAINER_TMPDIR to a larger filesystem" \
                "$([ -n "$RELEASE_IMAGE" ] || echo "or pass --release-image ")(the build is tried anyway)" >&2
        fi
    done
}
# own_sif SIF: the file this script built there, as it left it (its stamp: the image id, then size and time).
own_sif() {
    local stamp="$1.image" left
    [ -f "$stamp" ] || return 1
    left="$(sed -n 2p "$stamp")"
    [ -z "$left" ] || [ "$left" = "$(stat -c '%s %Y' "$1")" ]  # a stamp without the second line predates it
}
if [ -z "$inside" ]; then
    if [ -n "$SIF_GIVEN" ] && [ ! -f "$SIF" ]; then
        echo "cluster-test: --sif $SIF: no such file; --sif tests an image as it is and never builds one: build it" \
            "with 'just image-apptainer', or leave --sif out to build build/llada.sif" >&2
        exit 2
    fi
    if [ -z "$SIF_GIVEN" ] && [ -e "$SIF" ] && ! own_sif "$SIF"; then
        echo "cluster-test: $SIF was not built by this script (its stamp $SIF.image is missing or does not match" \
            "it), so it is not replaced: move it away, or test it as it is with --sif $SIF" >&2
        exit 2
    fi
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "cluster-test: run as root (apt-get, the SLURM daemons and a network namespace need it)" >&2
    exit 2
fi

# shellcheck source=container/stages.sh
. "$ROOT/container/stages.sh"
fail() {
    echo "cluster-test: FAILED: $*" >&2
    if [ -n "$inside" ]; then echo "FAILED: $*" >>"$inside/summary"; finish_stages; fi
    exit 1
}

if [ -z "$inside" ]; then
    # ------------------------------------------------------------ outside: install, sif, then the cluster
    TOTAL_START="$(date +%s)"
    SCRATCH="$(mktemp -d /tmp/llada-cluster-test.XXXXXX)"  # made here, so removed here
    part=""  # the new image while it is built, beside the old one
    trap 'rm -rf "$SCRATCH" ${part:+"$part"}' EXIT

    stage install
    export PATH="$APPTAINER_PREFIX/bin:$PATH"
    if ! command -v apptainer >/dev/null 2>&1; then
        builder="$ROOT/../shared/apptainer/build-apptainer.sh"
        [ -x "$builder" ] || fail "no apptainer, and no $builder to build it with"
        echo "building Apptainer into $APPTAINER_PREFIX (../shared/apptainer/build-apptainer.sh)"
        W="$SCRATCH/apptainer-build" PREFIX="$APPTAINER_PREFIX" "$builder" >"$SCRATCH/apptainer-build.log" 2>&1 || {
            tail -n 30 "$SCRATCH/apptainer-build.log" >&2
            fail "building Apptainer"
        }
        rm -rf "$SCRATCH/apptainer-build"
        echo "$MADE_MARK" >"$APPTAINER_PREFIX/.installed-by"
    fi
    # Unprivileged runs mount the SIF with the setuid starter's squashfs mount where /dev/fuse is root-only
    # (as in this kind of sandbox): set in the configuration of an Apptainer this script installed only.
    conf="$APPTAINER_PREFIX/etc/apptainer/apptainer.conf"
    if [ -f "$APPTAINER_PREFIX/.installed-by" ] && ! grep -q '^allow setuid-mount squashfs = yes' "$conf"; then
        sed -i 's/^#\{0,1\} *allow setuid-mount squashfs = .*/allow setuid-mount squashfs = yes/' "$conf"
        grep -q '^allow setuid-mount squashfs = yes' "$conf" || echo 'allow setuid-mount squashfs = yes' >>"$conf"
    fi
    apptainer version
    missing=()
    for pair in slurmd:slurmd slurmctld:slurmctld sbatch:slurm-client munged:munge ip:iproute2; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "installing ${missing[*]} from Debian's packages (their services are not started)"
        export DEBIAN_FRONTEND=noninteractive
        policy=""
        if [ ! -e /usr/sbin/policy-rc.d ]; then  # Debian's switch for "do not start what you install"
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
            chmod 0755 /usr/sbin/policy-rc.d
            policy=/usr/sbin/policy-rc.d
        fi
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        if [ -n "$policy" ]; then rm -f "$policy"; fi
    fi
    slurmctld -V

    stage sif
    if [ -n "$SIF_GIVEN" ]; then
        echo "testing $SIF as given (--sif: never built or replaced here)"
    else
        command -v podman >/dev/null 2>&1 || fail "no podman: run 'just image-test' first (it builds the image)"
        image="$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null)" ||
            fail "no image $TAG: run 'just image-test' first"
        if [ -f "$SIF" ] && [ "$(head -n 1 "$SIF.image" 2>/dev/null)" = "$image" ]; then
            echo "reusing $SIF (built from image ${image:0:12})"
        else
            # An OCI layout (a file per layer) rather than the docker archive users copy: Apptainer converts both
            # the same way, but reads a docker archive's tar once per layer, which took three times as long here.
            # Built beside the old .sif and renamed over it only once whole.
            mkdir -p "$(dirname "$SIF")"
            part="$(mktemp -d "$(dirname "$SIF")/.llada-sif.XXXXXX")"
            space_warning "$(podman image inspect --format '{{.Size}}' "$TAG")"
            podman save --format oci-dir --output "$SCRATCH/image.oci" "$TAG"
            echo "saved: $(du -sh "$SCRATCH/image.oci" | cut -f1)"
            if [ -n "$RELEASE_IMAGE" ]; then
                podman rmi "$TAG" >/dev/null
                echo "released $TAG from podman's storage (--release-image): 'just image-test' builds it again"
            fi
            apptainer build --disable-cache --mksquashfs-args "$SQUASHFS_ARGS" "$part/llada.sif" \
                "oci:$SCRATCH/image.oci" || fail "apptainer build"
            rm -rf "$SCRATCH/image.oci"
            mv -f "$part/llada.sif" "$SIF"  # over nothing, or over the file this script built (checked above)
            printf '%s\n%s\n' "$image" "$(stat -c '%s %Y' "$SIF")" >"$SIF.image"
        fi
    fi
    echo "$SIF: $(du -h "$SIF" | cut -f1)"
    stage ""

    # The cluster and its checks, in a network namespace of their own.
    chmod 0755 "$SCRATCH"
    status=0
    unshare --net "$ROOT/container/cluster-test.sh" --inside "$SCRATCH" --sif "$SIF" --stages "$STAGES" || status=$?
    echo
    echo "== cluster-test: $SIF"
    cat "$SCRATCH/summary" 2>/dev/null | sed 's/^/   /'
    for line in "${TIMES[@]}"; do echo "   $line"; done
    cat "$SCRATCH/times" 2>/dev/null | sed 's/^/   /'
    echo "   total    $(($(date +%s) - TOTAL_START))s"
    [ "$status" -eq 0 ] && echo "cluster-test: every check passed" || echo "cluster-test: FAILED" >&2
    exit "$status"
fi

# ---------------------------------------------------------------- inside the cluster's network namespace
SCRATCH="$inside"
SUMMARY="$SCRATCH/summary"
export PATH="$APPTAINER_PREFIX/bin:$PATH"
ip link set lo up
# glibc resolves a name to an IPv4 address only where some non-loopback IPv4 address exists (getaddrinfo's
# AI_ADDRCONFIG, which SLURM uses): a veth pair with both ends in this namespace gives it one, with no route
# out. Every name here resolves to 127.0.0.1, and that is where everything must listen (checked below).
ip link add llada-ct0 type veth peer name llada-ct1
ip addr add 10.254.254.1/32 dev llada-ct0
ip link set llada-ct0 up
note() { echo "$*" | tee -a "$SUMMARY"; }
finish_stages() { stage ""; printf '%s\n' "${TIMES[@]}" >"$SCRATCH/times"; }

# The unprivileged user every run and job belongs to, made here (and removed at the end) unless a previous
# run of this script left it.
made_user=""
if ! id "$RUN_USER" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir "$SCRATCH/home" --shell /bin/bash \
        --comment "$MADE_MARK" "$RUN_USER"
    made_user=1
elif [ "$(getent passwd "$RUN_USER" | cut -d: -f5)" = "$MADE_MARK" ]; then
    usermod --home "$SCRATCH/home" "$RUN_USER"
    made_user=1
else
    fail "user $RUN_USER exists and was not made by this script; set CLUSTER_TEST_USER to another name"
fi
mkdir -p "$SCRATCH/home" "$SCRATCH/work"
chown "$RUN_USER:" "$SCRATCH/home" "$SCRATCH/work"
if ! setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups test -r "$SIF"; then
    ln "$SIF" "$SCRATCH/llada.sif" 2>/dev/null || cp "$SIF" "$SCRATCH/llada.sif"  # a folder it cannot enter
    SIF="$SCRATCH/llada.sif"
fi
JOBS_SBATCH="$ROOT/container/accre.sbatch"
if ! setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups test -r "$JOBS_SBATCH"; then
    cp "$JOBS_SBATCH" "$SCRATCH/accre.sbatch"
    JOBS_SBATCH="$SCRATCH/accre.sbatch"
fi

# as_user DIR COMMAND...: run as the unprivileged user in DIR with a login-like environment.
as_user() {
    local dir="$1"
    shift
    (cd "$dir" && setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups \
        env -i HOME="$SCRATCH/home" USER="$RUN_USER" LOGNAME="$RUN_USER" PATH="$PATH" LANG=C.UTF-8 \
        SLURM_CONF="$SCRATCH/slurm/slurm.conf" "$@")
}

# ---------------------------------------------------------------- cluster
stage cluster
S="$SCRATCH/slurm"
mkdir -p "$S/state" "$S/log" "$S/dev" "$S/spool-node1" "$S/spool-node2"
teardown() {  # the daemons this script started, by the ids they wrote; then the user's leftovers
    local daemons=() pid
    if [ -n "${sampler:-}" ]; then kill "$sampler" 2>/dev/null || true; fi
    for file in "$S"/slurmd-*.pid "$S/slurmctld.pid" "$SCRATCH/munge/munged.pid"; do
        if [ -f "$file" ]; then daemons+=("$(cat "$file")"); fi
    done
    for pid in "${daemons[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 40); do
        alive=()
        for pid in "${daemons[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
        [ "${#alive[@]}" -eq 0 ] && break
        sleep 0.5
    done
    for pid in "${alive[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ -n "$made_user" ]; then
        # A job's process still alive now would be a leak: name it, then end it (it is this test's).
        leaked="$(pgrep -u "$RUN_USER" -a 2>/dev/null || true)"
        if [ -n "$leaked" ]; then
            echo "cluster-test: processes of $RUN_USER left behind:" >&2
            echo "$leaked" >&2
            while read -r pid _; do kill -KILL "$pid" 2>/dev/null || true; done <<<"$leaked"
            echo "leaked processes: $(wc -l <<<"$leaked")" >>"$SUMMARY"
        fi
        userdel "$RUN_USER" 2>/dev/null || true
    fi
}
trap teardown EXIT

# munge: its own key and socket, run as the munge user (Debian's package made it).
install -d -o munge -g munge -m 0711 "$SCRATCH/munge"
dd if=/dev/urandom of="$SCRATCH/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$SCRATCH/munge/munge.key"
chmod 0400 "$SCRATCH/munge/munge.key"
setpriv --reuid=munge --regid=munge --init-groups munged --socket="$SCRATCH/munge/munge.socket" \
    --key-file="$SCRATCH/munge/munge.key" --log-file="$SCRATCH/munge/munged.log" \
    --pid-file="$SCRATCH/munge/munged.pid" --seed-file="$SCRATCH/munge/munged.seed"

# Four fake A100s a node: character devices (/dev/null's numbers) that SLURM hands out as gres.
for node in node1 node2; do
    for i in 0 1 2 3; do mknod "$S/dev/$node-gpu$i" c 1 3; done
done
cpus="$(nproc)"
cat >"$S/slurm.conf" <<EOF
ClusterName=llada-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SCRATCH/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
NodeName=node1 NodeAddr=127.0.0.1 Port=6818 CPUs=$cpus Gres=gpu:a100:4 State=UNKNOWN
NodeName=node2 NodeAddr=127.0.0.1 Port=6819 CPUs=$cpus Gres=gpu:a100:4 State=UNKNOWN
PartitionName=batch_gpu Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$S/gres.conf" <<EOF
NodeName=node1 Name=gpu Type=a100 File=$S/dev/node1-gpu[0-3]
NodeName=node2 Name=gpu Type=a100 File=$S/dev/node2-gpu[0-3]
EOF
export SLURM_CONF="$S/slurm.conf"
{ cat /etc/hosts; echo "127.0.0.1 node1 node2"; } >"$S/hosts"
slurmctld -i
# Each node its own hostname (UTS namespace) and a hosts file naming both nodes (a private bind mount):
# what a job and its Ray see on "node2" is node2.
for node in node1 node2; do
    unshare --uts --mount --propagation private \
        sh -c "hostname $node && mount --bind '$S/hosts' /etc/hosts && exec slurmd -N $node"
done
for _ in $(seq 60); do
    [ "$(sinfo -h -o '%t' -N 2>/dev/null | grep -c idle)" -eq 2 ] && break
    sleep 1
done
sinfo -N -o '%N %t %G' | sed 's/^/   /'
[ "$(sinfo -h -o '%t' -N | grep -c idle)" -eq 2 ] || fail "the two nodes did not come up (see $S/log)"
# Every listening socket, every second while the checks run: SLURM, munge, srun, Ray and the sweeps'.
while :; do ss -Hltun | awk '{ print $1, $5 }'; sleep 1; done >"$SCRATCH/listening" 2>/dev/null &
sampler=$!

# The number of runs a spec plans, read from the plan (never assumed).
planned() { as_user "$SCRATCH/work" apptainer exec "$SIF" llada-bench plan "$1" | sed -n 's/^\([0-9]*\) runs planned.*/\1/p'; }
# ok_runs LOG: "N/M" from the last `finished M runs (K ok, ...)` line.
finished_line() { grep -E '^finished [0-9]+ runs' "$1" | tail -n 1; }
check_all_ok() {  # check_all_ok LOG PLANNED WHAT: every planned run finished ok in that log
    local line ran ok
    line="$(finished_line "$1")"
    ran="$(sed -n 's/^finished \([0-9]*\) runs.*/\1/p' <<<"$line")"
    ok="$(grep -oE '[0-9]+ ok' <<<"$line" | cut -d' ' -f1)"
    [ "${ok:-0}" = "$2" ] && [ "$ran" = "$2" ] || fail "$3: '$line', expected $2 runs, all ok"
    note "$3: ${ok}/$2 ok"
}
verified() {  # verified DIR WHAT: `llada-bench verify` in the image passes on DIR; its line goes to the summary
    local line
    line="$(as_user "$(dirname "$1")" apptainer exec "$SIF" llada-bench verify "$1")" || fail "$2: verify failed: $line"
    note "$2: $line"
}

# ---------------------------------------------------------------- a: apptainer run, as typed
check_a() {
    local A C line before refusal=0
    A="$SCRATCH/work/a"
    as_user "$SCRATCH/work" mkdir "$A"
    as_user "$A" apptainer run "$SIF" just sweep 2>&1 | tee "$SCRATCH/a-sweep.log" || fail "a: just sweep failed"
    [ -f "$A/artifacts/smoke/manifest.json" ] || fail "a: no ./artifacts/smoke in the caller's directory"
    check_all_ok "$SCRATCH/a-sweep.log" "$smoke_runs" "a. apptainer run llada.sif just sweep"
    line="$(as_user "$A" apptainer run "$SIF" just verify | tail -n 1)" || fail "a: just verify: $line"
    note "a. apptainer run llada.sif just verify: $line"
    before="$(stat -c %Y "$A/artifacts/smoke/report.html")"
    sleep 1
    as_user "$A" apptainer run --cleanenv --writable-tmpfs "$SIF" just figures >"$SCRATCH/a-figures.log" 2>&1 ||
        fail "a: just figures under --cleanenv --writable-tmpfs: $(tail -n 3 "$SCRATCH/a-figures.log")"
    [ "$(stat -c %Y "$A/artifacts/smoke/report.html")" -gt "$before" ] ||
        fail "a: just figures under --cleanenv --writable-tmpfs did not rewrite ./artifacts/smoke/report.html"
    note "a. --cleanenv --writable-tmpfs just figures: rewrote ./artifacts/smoke/report.html"
    C="$SCRATCH/work/contained"
    as_user "$SCRATCH/work" mkdir "$C"
    as_user "$C" apptainer run --containall "$SIF" just sweep >"$SCRATCH/a-vanish.log" 2>&1 || refusal=$?
    if [ "$refusal" -eq 0 ] || ! grep -q 'would vanish' "$SCRATCH/a-vanish.log" || grep -q '^finished' "$SCRATCH/a-vanish.log"; then
        fail "a: --containall with nothing bound did not refuse: $(tail -n 3 "$SCRATCH/a-vanish.log")"
    fi
    note "a. --containall, nothing bound: refused before running ($(grep -m1 'would vanish' "$SCRATCH/a-vanish.log" | cut -c1-110)...)"
    as_user "$C" apptainer run --containall --bind "$C" --pwd "$C" "$SIF" just sweep specs/tiny.yaml 2>&1 |
        tee "$SCRATCH/a-contained.log" || fail "a: just sweep under --containall with the directory bound failed"
    check_all_ok "$SCRATCH/a-contained.log" "$tiny_runs" "a. --containall --bind \$PWD --pwd \$PWD just sweep specs/tiny.yaml"
    verified "$C/artifacts/tiny" "a. verify (--containall)"
}

# ---------------------------------------------------------------- test: apptainer test
check_test() {
    local refused=0
    as_user "$SCRATCH/work" apptainer test "$SIF" | tee "$SCRATCH/test.log" || fail "apptainer test failed"
    note "test. apptainer test llada.sif: $(tail -n 1 "$SCRATCH/test.log")"
    as_user "$SCRATCH/work" env APPTAINERENV_LLADA_BENCH_IMAGE_CLAIMS=flash_attn apptainer test "$SIF" \
        >"$SCRATCH/test-fail.log" 2>&1 || refused=$?
    [ "$refused" -ne 0 ] || fail "apptainer test passed an image claiming flash_attn, which it lacks"
    note "test. claiming flash_attn, which the image lacks: exit $refused ($(grep -m1 '^FAIL' "$SCRATCH/test-fail.log"))"
}

# ---------------------------------------------------------------- b, c, d: jobs
J="$SCRATCH/work/jobs"
as_user "$SCRATCH/work" mkdir -p "$J/hf"
# submit NAME ARTIFACTS SBATCH-ARGS... -- SPEC: sbatch --wait as the user; prints the job id, keeps the exit
# status in $SCRATCH/NAME.rc and the job's output in $SCRATCH/NAME.out
submit() {
    local name="$1" artifacts="$2" rc=0 out
    shift 2
    out="$(as_user "$J" env LLADA_SIF="$SIF" LLADA_HF_CACHE="$J/hf" LLADA_ARTIFACTS="$artifacts" \
        sbatch --wait --parsable --output="$J/$name-%j.out" "$@")" || rc=$?
    echo "$rc" >"$SCRATCH/$name.rc"
    cp "$J/$name-$out.out" "$SCRATCH/$name.out" 2>/dev/null || true
    echo "$out"
}
exit_code() { scontrol show job "$1" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2; }
run_ids() { grep -oE '\([0-9a-f]{8,}\)$' "$@" | tr -d '()' | sort; }

# ---------------------------------------------------------------- b: one node, sbatch --wait
check_b() {
    local job rc
    job="$(submit b "$J/b" "$JOBS_SBATCH" specs/smoke.yaml)"
    cat "$SCRATCH/b.out"
    rc="$(cat "$SCRATCH/b.rc")"
    [ "$rc" -eq 0 ] || fail "b: job $job exited $rc (ExitCode=$(exit_code "$job"))"
    check_all_ok "$SCRATCH/b.out" "$smoke_runs" "b. sbatch --wait container/accre.sbatch specs/smoke.yaml (job $job, exit 0)"
    verified "$J/b/smoke" "b. verify"
}

# ---------------------------------------------------------------- c: the time limit, then resumed
check_c() {
    local job rc kept
    job="$(submit c1 "$J/c" --time=4 --signal=B:TERM@120 "$JOBS_SBATCH" specs/smoke.yaml)"
    cat "$SCRATCH/c1.out"
    rc="$(cat "$SCRATCH/c1.rc")"
    kept="$(find "$J/c/smoke/runs" -name '*.json' 2>/dev/null | wc -l)"
    [ "$rc" -eq 3 ] || fail "c: the time-limited job $job exited $rc, not 3 (ExitCode=$(exit_code "$job"))"
    [ "$kept" -gt 0 ] && [ "$kept" -lt "$smoke_runs" ] || fail "c: $kept of $smoke_runs runs kept after the time limit"
    verified "$J/c/smoke" "c. verify after the time limit"
    note "c. --time=4 --signal=B:TERM@120 (job $job): exit 3 ($(exit_code "$job")), $kept of $smoke_runs runs kept"
    (cd "$J/c/smoke/runs" && sha256sum ./*.json) >"$SCRATCH/c-kept.sha256"
    job="$(submit c2 "$J/c" "$JOBS_SBATCH" specs/smoke.yaml)"
    cat "$SCRATCH/c2.out"
    rc="$(cat "$SCRATCH/c2.rc")"
    [ "$rc" -eq 0 ] || fail "c: the resubmission $job exited $rc"
    grep -q "$smoke_runs runs planned, $kept already done, $((smoke_runs - kept)) to run" "$SCRATCH/c2.out" ||
        fail "c: the resubmission did not resume from the $kept kept runs"
    (cd "$J/c/smoke/runs" && sha256sum --check --quiet "$SCRATCH/c-kept.sha256") || fail "c: a kept run was rewritten"
    check_all_ok "$SCRATCH/c2.out" "$((smoke_runs - kept))" "c. resubmission (job $job, exit 0): resumed, the rest"
    verified "$J/c/smoke" "c. verify after the resubmission"
}

# ---------------------------------------------------------------- d: two nodes
check_d() {
    local job rc kept code left dups hosts sweeps
    # Stopped part-way: TERM to the batch script (what --signal=B:TERM sends) once a few runs are done.
    as_user "$J" env LLADA_SIF="$SIF" LLADA_HF_CACHE="$J/hf" LLADA_ARTIFACTS="$J/d" \
        sbatch --parsable --nodes=2 --gres=gpu:a100:1 --output="$J/d1-%j.out" "$JOBS_SBATCH" specs/tiny.yaml \
        >"$SCRATCH/d1.id"
    job="$(cat "$SCRATCH/d1.id")"
    for _ in $(seq 600); do
        [ "$(find "$J/d/tiny/runs" -name '*.json' 2>/dev/null | wc -l)" -ge 2 ] && break
        squeue -h -j "$job" 2>/dev/null | grep -q . || break
        sleep 1
    done
    scancel --batch --signal=TERM "$job"
    for _ in $(seq 300); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 1; done
    cp "$J/d1-$job.out" "$SCRATCH/d1.out"
    cat "$SCRATCH/d1.out"
    code="$(exit_code "$job")"
    [ "$code" = "3:0" ] || fail "d: the two-node job $job stopped with ExitCode=$code, not 3"
    kept="$(find "$J/d/tiny/runs" -name '*.json' | wc -l)"
    grep -q "Ray head on node1" "$SCRATCH/d1.out" && grep -q "Ray worker on node2" "$SCRATCH/d1.out" ||
        grep -q "Ray cluster of 2 nodes" "$SCRATCH/d1.out" || fail "d: no Ray cluster of two nodes in job $job"
    for _ in $(seq 30); do pgrep -u "$RUN_USER" >/dev/null || break; sleep 1; done
    left="$(pgrep -u "$RUN_USER" -a || true)"
    [ -z "$left" ] || fail "d: processes left after TERM: $left"
    ls -d /tmp/llada-ray-"$job".* 2>/dev/null && fail "d: a node's Ray temp folder was left after TERM"
    note "d. two nodes, TERM part-way (job $job): exit 3 ($code), $kept of $tiny_runs runs kept, every node's Ray stopped and its temp folder removed"
    job="$(submit d2 "$J/d" --nodes=2 --gres=gpu:a100:1 "$JOBS_SBATCH" specs/tiny.yaml)"
    cat "$SCRATCH/d2.out"
    rc="$(cat "$SCRATCH/d2.rc")"
    [ "$rc" -eq 0 ] || fail "d: the two-node resubmission $job exited $rc"
    grep -q "Ray cluster of 2 nodes" "$SCRATCH/d2.out" || fail "d: job $job did not form a Ray cluster of two nodes"
    check_all_ok "$SCRATCH/d2.out" "$((tiny_runs - kept))" "d. two nodes, resubmitted (job $job, exit 0)"
    verified "$J/d/tiny" "d. verify"
    # Each run once: the run ids the two jobs finished are the plan's, none twice.
    dups="$(run_ids "$SCRATCH/d1.out" "$SCRATCH/d2.out" | uniq -d)"
    [ -z "$dups" ] || fail "d: runs executed twice: $dups"
    [ "$(run_ids "$SCRATCH/d1.out" "$SCRATCH/d2.out" | wc -l)" -eq "$tiny_runs" ] || fail "d: not every run finished once"
    # On both nodes: the hostname each run recorded.
    hosts="$(python3 -c 'import json, sys; print(" ".join(sorted({json.load(open(f))["environment"]["hostname"] for f in sys.argv[1:]})))' \
        "$J"/d/tiny/runs/*.json)"
    [ "$hosts" = "node1 node2" ] || fail "d: the runs ran on '$hosts', not on both nodes"
    # The artifacts once, where LLADA_ARTIFACTS says: no other sweep directory anywhere in the test's folders.
    sweeps="$(find "$SCRATCH" -name manifest.json -path '*tiny*' | grep -v "^$SCRATCH/work/contained/")"
    [ "$sweeps" = "$J/d/tiny/manifest.json" ] || fail "d: sweep directories: $sweeps"
    ls -d /tmp/llada-ray-"$job".* 2>/dev/null && fail "d: a node's Ray temp folder was left"
    note "d. each of the $tiny_runs runs once, on nodes: $hosts; one sweep directory, \$LLADA_ARTIFACTS/tiny"
}

# ---------------------------------------------------------------- run the stages asked for
if ! as_user "$SCRATCH/work" apptainer exec "$SIF" true >"$SCRATCH/start.log" 2>&1; then
    fail "$RUN_USER cannot run $SIF ($(grep -m1 -i error "$SCRATCH/start.log")); where /dev/fuse is root-only," \
        "Apptainer needs 'allow setuid-mount squashfs = yes' in $(apptainer buildcfg SYSCONFDIR)/apptainer/apptainer.conf"
fi
smoke_runs="$(planned specs/smoke.yaml)"
tiny_runs="$(planned specs/tiny.yaml)"
[ -n "$smoke_runs" ] && [ -n "$tiny_runs" ] || fail "llada-bench plan printed no run count"
for name in $STAGES; do
    stage "$name"
    "check_$name"
done
kill "$sampler"
sampler=""
beyond="$(awk '$2 !~ /^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):[0-9]+$/' "$SCRATCH/listening" | sort -u)"
[ -z "$beyond" ] || fail "listening beyond loopback: $(tr '\n' ' ' <<<"$beyond")"
note "listening: $(sort -u "$SCRATCH/listening" | wc -l) sockets seen over the checks, every one on 127.0.0.1"
finish_stages
