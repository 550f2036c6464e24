# llada-bench: `just --list` is the manual's table of contents.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes
default:
    @just --list --unsorted

# Run a sweep end to end (plan → Ray workers → artifacts → report); resumes where it stopped
[positional-arguments]
sweep SPEC="specs/smoke.yaml" *ARGS:
    llada-bench sweep "$@"

# Build llama.cpp (llama-cpp-python's pinned source from the package registry) once, cached outside the checkout, and install it here; resumable, e.g. `just engine --jobs 2`
[positional-arguments]
engine *ARGS:
    python -m workers.engine.build "$@"

# Regenerate results.parquet, every figure and report.html from a sweep's artifacts alone
[positional-arguments]
figures DIR="artifacts/smoke" *ARGS:
    llada-bench report "$@"

# Unpack the H200 sweeps (tests/data/h200/*.tgz) into results/h200/, verify their checksums, regenerate their reports, then leave out results.parquet and report.html as committed (`llada-bench report DIR` renders them again)
h200-results:
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p results/h200
    for sweep in campaign-h100 accel-8b; do
        rm -rf "results/h200/$sweep"
        tar -xzf "tests/data/h200/$sweep.tgz" -C results/h200
        llada-bench verify "results/h200/$sweep"
        llada-bench report "results/h200/$sweep"
        llada-bench leave-out "results/h200/$sweep"
        llada-bench verify "results/h200/$sweep"
    done

# The GPU round's headline: with EXPORT (a call's export), its headline sweeps into results/<gpu>/headline/; then every results/*/headline/ verified, reported, rendered into headline.md and the README's block
[positional-arguments]
headline-results *EXPORT:
    #!/usr/bin/env bash
    set -euo pipefail
    shopt -s nullglob
    if [ "$#" -gt 0 ]; then python -m orchestrator.gpu_round.results "$@"; fi
    for sweep in results/*/headline/*/; do
        llada-bench verify "$sweep"
        llada-bench report "$sweep"
    done
    python -m report.answer.headline --results results --readme README.md

# Validate a spec and list its planned runs
[positional-arguments]
plan SPEC="specs/smoke.yaml":
    llada-bench plan "$1"

# Recompute every checksum of a sweep directory
[positional-arguments]
verify DIR="artifacts/smoke":
    llada-bench verify "$1"

# Analytical roofline, e.g. `just roofline llada --prompt-len 128 --gen-len 512 --block-length 32 --steps 256`
[positional-arguments]
roofline *ARGS:
    llada-bench roofline "$@"

# Print the environment record a worker captures (GPU, CUDA, library versions)
env:
    llada-bench env

# Measure this machine's roofs (matmul peak, memory bandwidth, per-op dispatch floor), e.g. `just calibrate --dtype float32`
[positional-arguments]
calibrate *ARGS:
    llada-bench calibrate "$@"

# Run the whole test suite (slow tests included)
[positional-arguments]
test *ARGS:
    python -m pytest "$@"

# The fast tests against the newest releases pyproject.toml's ranges allow, in a scratch venv: finds the next break before a user does
[positional-arguments]
test-latest VENV="build/venv-latest" *ARGS:
    python3 -m venv --clear "$1"
    "$1"/bin/pip install -q --upgrade -e '.[test]'
    "$1"/bin/python -c "import importlib.metadata as m; print('newest in range:', ', '.join(f'{p} {m.version(p)}' for p in ('torch', 'transformers', 'tokenizers', 'pydantic', 'polars', 'ray', 'numpy')))"
    "$1"/bin/python -m pytest -m "not slow" -q "${@:2}"

# Speed benchmarks: samplers against their baselines, time per forward eager vs compiled, roofline evaluation cost, PyTorch against llama.cpp (each side, tokens equal)
bench:
    python -m workers.measure.bench
    python -m workers.measure.bench_forward
    python -m roofline.bench
    python -m workers.measure.bench_engine

# Pre-fetch every model, tokenizer, dataset and scorer SPEC names into the HF cache, then verify it offline (login node)
[positional-arguments]
download SPEC *ARGS:
    llada-bench download "$@"

# Regenerate container/requirements.lock, the image's pinned and hashed stack (needs uv and PyPI)
lock:
    python container/lock.py

# Build the Docker image (CUDA 12.6, torch, flash-attn, the project); needs docker and internet
[positional-arguments]
image-docker TAG="llada-bench:latest":
    docker build --build-arg IMAGE_ID="$(container/image-id.sh)" --build-arg GIT_COMMIT="$(git rev-parse HEAD)" -t "$1" .

# Build the Apptainer image from Apptainer.def (Apptainer >= 1.2, internet; add --fakeroot where required)
[positional-arguments]
image-apptainer SIF="llada.sif" *ARGS:
    apptainer build "${@:2}" --build-arg IMAGE_ID="$(container/image-id.sh)" --build-arg GIT_COMMIT="$(git rev-parse HEAD)" "$1" Apptainer.def

# Build the registry-only image (--build-arg VARIANT=registry) with podman and run `just sweep` and its fast tests in it as Apptainer would (root, Debian; no GPU, no container registry)
[positional-arguments]
image-test *ARGS:
    container/image-test.sh "$@"

# The ACCRE path as users run it: a real Apptainer and a two-node SLURM cluster on loopback run the image `just image-test` built (build/llada.sif): `apptainer run`, `apptainer test`, sbatch, a time limit, two nodes (root, Debian)
[positional-arguments]
cluster-test *ARGS:
    container/cluster-test.sh "$@"

# Write the image `just image-test` built as a docker archive, for `apptainer build llada.sif docker-archive://build/llada-bench.tar`; TAR is replaced only once the new archive is whole
[positional-arguments]
image-archive TAR="build/llada-bench.tar" TAG="localhost/llada-bench:registry":
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p "$(dirname "$1")"
    part="$(mktemp -d "$(dirname "$1")/.image-archive.XXXXXX")"
    trap 'rm -rf "$part"' EXIT
    podman save --format docker-archive --output "$part/archive.tar" "$2"
    mv -f "$part/archive.tar" "$1"

# Submit a sweep to ACCRE: one exclusive A100 node running llada.sif (several: --nodes=N), e.g. `just accre specs/paper.yaml --account=mygroup_acc`
[positional-arguments]
accre SPEC="specs/paper.yaml" *SBATCH:
    sbatch "${@:2}" container/accre.sbatch "$1"

# Submit a sweep to a running Ray cluster as a job; OUT is a directory on the head node (shared storage)
[positional-arguments]
ray-submit ADDRESS SPEC OUT *ARGS:
    ray job submit --address "$1" --working-dir . -- llada-bench sweep "$2" --out "$3" "${@:4}"

# Train the miniature LLaMA/LLaDA pair from Debian's python3.11-doc (tens of minutes on 2 cores; resumable)
[positional-arguments]
train-miniature *ARGS:
    llada-bench train "$@"

# Tests that need a CUDA device (skipped elsewhere): event timing, memory baseline, OOM, kernels, logits; < 5 min
[positional-arguments]
test-gpu *ARGS:
    container/gpu-tests.sh "$@"

# Where a compiled LLaMA decode step's time goes (CUDA): its share of the roofline's memory roof and torch.profiler kernels per decode attention, e.g. `just profile-decode --batch 1 64`
[positional-arguments]
profile-decode *ARGS:
    python -m tests.gpu.profile_decode "$@"

# Make the folder an offline GPU machine needs for a campaign: wheels for its PYTHON (e.g. 3.12) and the tokenizer
[positional-arguments]
gpu-bundle DIR="build/gpu-bundle" PYTHON="":
    container/gpu-bundle.sh "$@"

# Run a campaign on this GPU machine: inline (no Ray), offline, resumable, packed into one tarball
[positional-arguments]
campaign SPEC="specs/campaign-h100.yaml" *ARGS:
    container/gpu-campaign.sh "$@"

# One GPU round from one bundle, its first call of at most 9 min the 8B headline (graph tests, then B = 1 in 3 interleaved sessions), each piece packed into --export as it ends, resumable with --resume; gpu-round.json scores the goals; `--dry-run` plans it on h100-sxm and h200; `--toy` runs call 1 at toy shapes on this CPU
[positional-arguments]
gpu-round *ARGS:
    container/gpu-round.sh "$@"
