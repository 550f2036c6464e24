# llada-bench: CUDA 12.6 + cuDNN, CPython 3.13, torch 2.7.1 (CUDA 12.6), flash-attn 2.8.3, ray, the project.
# Build: `just image-docker`. Every pin is in container/stack.env and container/requirements.lock, which
# container/install-stack.sh installs; Apptainer.def runs the same script on the same base.
# `--build-arg VARIANT=registry` builds the variant that needs only Debian's mirrors and PyPI: Debian trixie
# and its python3.13, the same lock less flash-attn (`just image-test` builds and runs it on a CPU machine).
ARG VARIANT=cuda
ARG CUDA_BASE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04
ARG DEBIAN_BASE=docker.io/library/debian:trixie-slim

# LLADA_BENCH_IMAGE_CLAIMS is what `llada-bench env --require-image` checks: the CUDA image claims the GPU
# stack, the registry variant (no flash-attn, built and tested on CPU) claims nothing.
FROM ${CUDA_BASE} AS cuda
ENV LLADA_BENCH_IMAGE_CLAIMS=cuda,bf16,flash_attn

FROM ${DEBIAN_BASE} AS registry
ENV LLADA_BENCH_IMAGE_CLAIMS=

FROM ${VARIANT}
ARG VARIANT

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# HF_HOME is a bind point for a cache filled by `just download` on a machine with internet; compute nodes
# are offline, so every hub library is told so. `just` reads the image's own menu (the recipes that work in
# the image) from JUST_JUSTFILE, whatever the working directory.
ENV LLADA_BENCH_HOME=/opt/llada-bench \
    LLADA_BENCH_JUDGE_CACHE=/opt/llada-bench-judge \
    PATH=/opt/venv/bin:${PATH} \
    HF_HOME=/hf-cache \
    HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    RAY_USAGE_STATS_ENABLED=0 \
    PYTHONUNBUFFERED=1 \
    JUST_JUSTFILE=/opt/llada-bench/container/image.justfile \
    JUST_WORKING_DIRECTORY=/opt/llada-bench

WORKDIR /opt/llada-bench

# Dependencies first (they change only with the pins or the lock), then the sources (.dockerignore lists them).
COPY container/install-stack.sh container/stack.env container/requirements.lock container/
RUN container/install-stack.sh deps "${VARIANT}"
COPY . .
# /.singularity.d/test is what `apptainer test` runs: a .sif built from this image's docker archive keeps it.
RUN container/install-stack.sh project \
    && groupadd --gid 10001 bench \
    && useradd --uid 10001 --gid 10001 --create-home --shell /bin/bash bench \
    && mkdir -p /.singularity.d \
    && ln -s /opt/llada-bench/container/image-check.sh /.singularity.d/test

# Recorded in every artifact's environment (workers/environment.py): which image, built from which commit.
ARG IMAGE_ID=llada-bench:unversioned
ARG GIT_COMMIT=unknown
ENV LLADA_BENCH_IMAGE=${IMAGE_ID} \
    LLADA_BENCH_GIT_COMMIT=${GIT_COMMIT}
# The runscript Apptainer writes for a .sif built from this image reads SINGULARITY_NO_EVAL: set, it passes the
# arguments as given (as `apptainer run --no-eval` does), instead of evaluating `$` and quotes in them again.
ENV SINGULARITY_NO_EVAL=1
# The same labels as Apptainer.def's; `just image-test` prunes only the dangling images that carry them.
LABEL org.opencontainers.image.title=llada-bench \
      org.opencontainers.image.description="LLaDA-8B vs LLaMA-3-8B inference benchmark"

# An unprivileged user; any other uid works too (`docker run --user "$(id -u):$(id -g)"`, Apptainer): the entry
# point moves HOME and every cache to a writable place when HOME is not writable.
USER 10001:10001
# The health check touches no GPU (no CUDA context, no kernel): it runs beside a sweep that holds the GPU
# exclusively, every 10 minutes, and must neither share that GPU nor perturb its timings.
HEALTHCHECK --interval=10m --timeout=2m --start-period=1m --retries=1 \
    CMD ["llada-bench", "env", "--require-image", "--no-device"]
ENTRYPOINT ["/opt/llada-bench/container/entrypoint.sh"]
