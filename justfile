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

# Run the whole test suite (slow tests included)
test *ARGS:
    python -m pytest {{ARGS}}

# Speed benchmarks: samplers against their baselines, roofline evaluation cost
bench:
    python -m workers.bench
    python -m roofline.bench
