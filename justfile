# llada-bench: `just --list` is the manual's table of contents.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes
default:
    @just --list --unsorted

# Run a sweep end to end (plan → Ray workers → artifacts → report); resumes where it stopped
sweep SPEC="specs/smoke.yaml" *ARGS:
    llada-bench sweep {{SPEC}} {{ARGS}}

# Regenerate results.parquet, every figure and report.html from a sweep's artifacts alone
figures DIR="artifacts/smoke" *ARGS:
    llada-bench report {{DIR}} {{ARGS}}

# Unpack the H200 sweeps (tests/data/h200/*.tgz) into results/h200/, verify their checksums, regenerate their reports
h200-results:
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p results/h200
    for sweep in campaign-h100 accel-8b; do
        rm -rf "results/h200/$sweep"
        tar -xzf "tests/data/h200/$sweep.tgz" -C results/h200
        llada-bench verify "results/h200/$sweep"
        llada-bench report "results/h200/$sweep"
    done

# Validate a spec and list its planned runs
plan SPEC="specs/smoke.yaml":
    llada-bench plan {{SPEC}}

# Recompute every checksum of a sweep directory
verify DIR="artifacts/smoke":
    llada-bench verify {{DIR}}

# Analytical roofline, e.g. `just roofline llada --prompt-len 128 --gen-len 512 --block-length 32 --steps 256`
roofline *ARGS:
    llada-bench roofline {{ARGS}}

# Print the environment record a worker captures (GPU, CUDA, library versions)
env:
    llada-bench env

# Measure this machine's roofs (matmul peak, memory bandwidth, per-op dispatch floor), e.g. `just calibrate --dtype float32`
calibrate *ARGS:
    llada-bench calibrate {{ARGS}}

# Run the whole test suite (slow tests included)
test *ARGS:
    python -m pytest {{ARGS}}

# The fast tests against the newest releases pyproject.toml's ranges allow, in a scratch venv: finds the next break before a user does
test-latest VENV="build/venv-latest" *ARGS:
    python3 -m venv --clear {{VENV}}
    {{VENV}}/bin/pip install -q --upgrade -e '.[test]'
    {{VENV}}/bin/python -c "import importlib.metadata as m; print('newest in range:', ', '.join(f'{p} {m.version(p)}' for p in ('torch', 'transformers', 'tokenizers', 'pydantic', 'polars', 'ray', 'numpy')))"
    {{VENV}}/bin/python -m pytest -m "not slow" -q {{ARGS}}

# Speed benchmarks: samplers against their baselines, time per forward eager vs compiled, roofline evaluation cost
bench:
    python -m workers.measure.bench
    python -m workers.measure.bench_forward
    python -m roofline.bench

# Pre-fetch every model, tokenizer, dataset and scorer SPEC names into the HF cache, then verify it offline (login node)
download SPEC *ARGS:
    llada-bench download {{SPEC}} {{ARGS}}

# Regenerate container/requirements.lock, the image's pinned and hashed stack (needs uv and PyPI)
lock:
    python container/lock.py

# Build the Docker image (CUDA 12.6, torch, flash-attn, the project); needs docker and internet
image-docker TAG="llada-bench:latest":
    docker build --build-arg IMAGE_ID="$(container/image-id.sh)" --build-arg GIT_COMMIT="$(git rev-parse HEAD)" -t {{TAG}} .

# Build the Apptainer image from Apptainer.def (Apptainer >= 1.2, internet; add --fakeroot where required)
image-apptainer SIF="llada.sif" *ARGS:
    apptainer build {{ARGS}} --build-arg IMAGE_ID="$(container/image-id.sh)" --build-arg GIT_COMMIT="$(git rev-parse HEAD)" {{SIF}} Apptainer.def

# Submit a sweep to ACCRE: one exclusive A100 node running llada.sif, e.g. `just accre specs/paper.yaml --account=mygroup_acc`
accre SPEC="specs/paper.yaml" *SBATCH:
    sbatch {{SBATCH}} container/accre.sbatch {{SPEC}}

# Submit a sweep to a running Ray cluster as a job; OUT is a directory on the head node (shared storage)
ray-submit ADDRESS SPEC OUT *ARGS:
    ray job submit --address {{ADDRESS}} --working-dir . -- llada-bench sweep {{SPEC}} --out {{OUT}} {{ARGS}}

# Train the miniature LLaMA/LLaDA pair from Debian's python3.11-doc (tens of minutes on 2 cores; resumable)
train-miniature *ARGS:
    llada-bench train {{ARGS}}

# Tests that need a CUDA device (skipped elsewhere): event timing, memory baseline, OOM, kernels, logits; < 5 min
test-gpu *ARGS:
    container/gpu-tests.sh {{ARGS}}

# Where a compiled LLaMA decode step's time goes (CUDA): torch.profiler kernels per decode attention, e.g. `just profile-decode --batch 64`
profile-decode *ARGS:
    python tests/gpu/profile_decode.py {{ARGS}}

# Make the folder an offline GPU machine needs for a campaign: wheels for its PYTHON (e.g. 3.12) and the tokenizer
gpu-bundle DIR="build/gpu-bundle" PYTHON="":
    container/gpu-bundle.sh {{DIR}} {{PYTHON}}

# Run a campaign on this GPU machine: inline (no Ray), offline, resumable, packed into one tarball
campaign SPEC="specs/campaign-h100.yaml" *ARGS:
    container/gpu-campaign.sh {{SPEC}} {{ARGS}}
