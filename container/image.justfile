# llada-bench inside the image: the recipes of the project's justfile that work here (the image sets
# JUST_JUSTFILE to this file). Each one runs the project justfile's recipe of the same name, so the two cannot
# drift; tests/test_container.py checks that every recipe here exists there with the same parameters and doc.
# Left out: what needs the internet, a scheduler, docker or apptainer, or writes into the read-only image.

set shell := ["bash", "-euo", "pipefail", "-c"]

project := "just --justfile " + quote(justfile_directory() / ".." / "justfile") + " --working-directory " + quote(justfile_directory() / "..")

# Show the recipes
default:
    @just --list --unsorted

# Run a sweep end to end (plan → Ray workers → artifacts → report); resumes where it stopped
sweep SPEC="specs/smoke.yaml" *ARGS:
    @{{project}} sweep {{SPEC}} {{ARGS}}

# Regenerate results.parquet, every figure and report.html from a sweep's artifacts alone
figures DIR="artifacts/smoke" *ARGS:
    @{{project}} figures {{DIR}} {{ARGS}}

# Validate a spec and list its planned runs
plan SPEC="specs/smoke.yaml":
    @{{project}} plan {{SPEC}}

# Recompute every checksum of a sweep directory
verify DIR="artifacts/smoke":
    @{{project}} verify {{DIR}}

# Analytical roofline, e.g. `just roofline llada --prompt-len 128 --gen-len 512 --block-length 32 --steps 256`
roofline *ARGS:
    @{{project}} roofline {{ARGS}}

# Print the environment record a worker captures (GPU, CUDA, library versions)
env:
    @{{project}} env

# Measure this machine's roofs (matmul peak, memory bandwidth, per-op dispatch floor), e.g. `just calibrate --dtype float32`
calibrate *ARGS:
    @{{project}} calibrate {{ARGS}}

# Run the whole test suite (slow tests included)
test *ARGS:
    @{{project}} test {{ARGS}}

# Tests that need a CUDA device (skipped elsewhere): event timing, memory baseline, OOM, kernels, logits; < 5 min
test-gpu *ARGS:
    @{{project}} test-gpu {{ARGS}}

# Where a compiled LLaMA decode step's time goes (CUDA): torch.profiler kernels per decode attention, e.g. `just profile-decode --batch 64`
profile-decode *ARGS:
    @{{project}} profile-decode {{ARGS}}
