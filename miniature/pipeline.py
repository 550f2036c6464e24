"""`llada-bench train`: corpus → tokenizer → the AR model → the LLaDA model → the block-diffusion model
adapted from the AR one (miniature/block_diffusion_stage.py) → the shipped folder.

Every stage leaves its output in the work folder (default `build/miniature/`) and is skipped when that
output is already there, and each model resumes from its last checkpoint, so an interrupted run is
continued by running the same command again. The shipped pair is written last, with checksums.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from miniature.architecture import Arch, MiniatureShape, miniature_shape
from miniature.block_diffusion_stage import BlockDiffusionStage
from miniature.corpus import Corpus, corpus_from_deb, download_deb, read_corpus, write_corpus
from miniature.pair_folder import publish
from miniature.tokenizer import special_ids, train_tokenizer, unigram_entropy_nats
from miniature.trainer import (
    TrainConfig,
    best_evaluation,
    kept_evaluations,
    load_evaluation_weights,
    steps_for_tokens,
)

DEFAULT_WORK_DIR = Path("build/miniature")
DEFAULT_OUT_DIR = Path("models/miniature")
NUM_LAYERS = 4
HIDDEN_SIZE = 256

# The training rule, one for every member of the miniature set (stated in the report's departures and in
# docs/miniature.md): every member sees the same total token budget, TOKEN_BUDGET, and ships the weights of
# its held-out evaluation with the best loss. A member adapted from another counts its base's tokens: it
# starts from the base's weights kept at the evaluation at TOKEN_BUDGET − F tokens and trains F more.
# The budget is the LLaDA member's: a masked-diffusion model needs more tokens than an AR one to leave the
# unigram plateau (each sequence teaches it only its masked share; at this size its held-out bound stays at
# the unigram entropy for the first ~1.2M tokens), and 1600 of its steps (30% of them cropped) hold exactly
# this many tokens. The AR member reaches it in 1394 steps of 32 × 128 tokens.
TOKEN_BUDGET = 5_707_904


def training_rule(tokens: int = TOKEN_BUDGET) -> str:
    return (f"every member sees the same {tokens:,} training tokens and ships the weights of its held-out "
            "evaluation with the best loss; a member adapted from another counts its base's tokens")


TRAINING_RULE = training_rule()

# How each member trains, but for its step count, which the budget sets (`default_configs`).
BASE_CONFIGS: dict[str, TrainConfig] = {
    "llama": TrainConfig(steps=1, warmup_steps=50, eval_every=50, checkpoint_every=50),
    "llada": TrainConfig(steps=1, warmup_steps=50, eval_every=100, checkpoint_every=50),
}
CONTEXT = 128  # every member's training window (MiniatureShape.context)


def default_configs(tokens: int = TOKEN_BUDGET) -> dict[str, TrainConfig]:
    """Each member's configuration with the step count that holds `tokens` tokens under its own draws."""
    return {arch: dataclasses.replace(config, steps=steps_for_tokens(arch, CONTEXT, config, tokens))
            for arch, config in BASE_CONFIGS.items()}


def adapted_start(base_work_dir: Path, fine_tune_tokens: int, tokens: int = TOKEN_BUDGET) -> Path:
    """The weights from which a member adapted from the one trained in `base_work_dir` starts, so that
    together they see `tokens`: the base's evaluation at exactly `tokens − fine_tune_tokens` tokens
    (an error lists the token counts there are)."""
    wanted = tokens - fine_tune_tokens
    kept = kept_evaluations(base_work_dir)
    for evaluation in kept:
        if evaluation["tokens"] == wanted:
            return evaluation["path"]
    available = ", ".join(str(e["tokens"]) for e in kept) or "none (train the base first)"
    raise ValueError(f"{base_work_dir}: no evaluation at {wanted} tokens ({tokens} − {fine_tune_tokens}); "
                     f"choose a fine-tuning budget that leaves one of: {available}")


def with_rule_base(stage: BlockDiffusionStage, work_dir: Path, tokens: int = TOKEN_BUDGET) -> BlockDiffusionStage:
    """The stage with its base: as given, else where the training rule starts it, the AR run's weights kept in
    `work_dir` at `tokens` less the stage's fine-tuning tokens."""
    if stage.base is not None:
        return stage
    return dataclasses.replace(stage, base=adapted_start(work_dir / "llama", stage.fine_tune_tokens, tokens))


@dataclass(frozen=True)
class TokenData:
    train: torch.Tensor  # [N] train pages, <|endoftext|> between them
    heldout: torch.Tensor  # [M]
    unigram_entropy_nats: float


def ensure_corpus(work_dir: Path, deb: Path | None = None, version: str | None = None) -> Corpus:
    folder = work_dir / "corpus"
    if (folder / "corpus.json").is_file():
        return read_corpus(folder)
    downloads = work_dir / "download"
    downloads.mkdir(parents=True, exist_ok=True)
    corpus = corpus_from_deb(deb or download_deb(downloads, version))
    write_corpus(corpus, folder)
    return corpus


def ensure_tokenizer(work_dir: Path, corpus: Corpus):  # -> PreTrainedTokenizerFast
    from transformers import PreTrainedTokenizerFast

    folder = work_dir / "tokenizer"
    if (folder / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    train_tokenizer(page.text for page in corpus.train).save_pretrained(str(folder))
    # Read back as a resumed run reads it, so the shipped tokenizer files are the same bytes either way.
    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def token_data(work_dir: Path, corpus: Corpus, tokenizer) -> TokenData:
    path = work_dir / "tokens.pt"
    if path.is_file():
        saved = torch.load(path)
        return TokenData(saved["train"], saved["heldout"], saved["unigram_entropy_nats"])
    eos = special_ids(tokenizer)["<|endoftext|>"]

    def stream(pages: tuple) -> torch.Tensor:
        encoded = tokenizer([page.text for page in pages], add_special_tokens=False)["input_ids"]
        return torch.tensor([token for ids in encoded for token in [*ids, eos]], dtype=torch.long)

    train, heldout = stream(corpus.train), stream(corpus.heldout)
    data = TokenData(train, heldout, unigram_entropy_nats(train.tolist()))
    torch.save({"train": train, "heldout": heldout, "unigram_entropy_nats": data.unigram_entropy_nats}, path)
    return data


def shape_for(arch: Arch, vocab_size: int) -> MiniatureShape:
    return miniature_shape(arch, vocab_size, hidden_size=HIDDEN_SIZE, num_layers=NUM_LAYERS)


def write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def train_member(arch: Arch, work_dir: Path, tokenizer, data: TokenData, config: TrainConfig, *, quiet: bool = False):
    """Train (or resume, or find finished) one member, with a progress bar and one line per evaluation."""
    from tqdm import tqdm

    from miniature.trainer import train

    shape = shape_for(arch, len(tokenizer))
    bar = tqdm(total=config.steps, desc=f"train {arch}", unit="step", disable=quiet, dynamic_ncols=True)

    def on_step(log, loss: float) -> None:
        bar.n = log.step
        bar.set_postfix(loss=f"{loss:.3f}", tokens=f"{log.tokens_seen / 1e6:.2f}M", refresh=False)
        bar.update(0)

    def on_eval(log) -> None:
        last = log.evaluations[-1]
        bar.write(
            f"{arch} step {last['step']:>5}  tokens {last['tokens'] / 1e6:6.2f}M  "
            f"held-out {'loss' if arch == 'llama' else 'bound'} {last['heldout_loss']:.4f} nats/token  "
            f"(unigram entropy {data.unigram_entropy_nats:.4f})  {last['wall_s']:.0f} s"
        )

    try:
        model, log = train(shape, special_ids(tokenizer), data.train, data.heldout, config, work_dir / arch,
                           on_step=on_step, on_eval=on_eval)
        bar.n = log.step  # a member finished earlier resumes at its last step: show it done
        bar.refresh()
    finally:
        bar.close()
    return model, log


def run_pipeline(
    work_dir: Path = DEFAULT_WORK_DIR,
    out_dir: Path = DEFAULT_OUT_DIR,
    configs: dict[str, TrainConfig] | None = None,
    deb: Path | None = None,
    deb_version: str | None = None,
    quiet: bool = False,
    block_diffusion: BlockDiffusionStage | None = BlockDiffusionStage(),
    tokens: int = TOKEN_BUDGET,
) -> dict:
    """Corpus → tokenizer → AR model → LLaDA model → block-diffusion model (None: not this stage) → `out_dir`,
    each member trained to `tokens` (`configs`' step counts hold them); returns the provenance written there.

    The pair is staged in the work folder and published whole at the end (miniature/pair_folder.py)."""
    configs = configs or default_configs(tokens)
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pair-", dir=work_dir) as staging:
        provenance = _train_into(work_dir, Path(staging), configs, deb, deb_version, quiet, block_diffusion, tokens)
        publish(Path(staging), out_dir)
    return provenance


def _train_into(work_dir: Path, out_dir: Path, configs: dict[str, TrainConfig], deb: Path | None,
                deb_version: str | None, quiet: bool, block_diffusion: BlockDiffusionStage | None, tokens: int) -> dict:
    from miniature.export import save_llada, save_llama, write_checksums, write_training_log

    corpus = ensure_corpus(work_dir, deb, deb_version)
    tokenizer = ensure_tokenizer(work_dir, corpus)
    data = token_data(work_dir, corpus, tokenizer)
    special = special_ids(tokenizer)
    corpus_info = json.loads((work_dir / "corpus" / "corpus.json").read_text(encoding="utf-8"))
    provenance: dict = {
        "corpus": corpus_info,
        "tokenizer": {"vocab_size": len(tokenizer), "special_tokens": special},
        "train_tokens": int(data.train.numel()),
        "heldout_tokens": int(data.heldout.numel()),
        "unigram_entropy_nats": data.unigram_entropy_nats,
        "training_rule": training_rule(tokens),
        "models": {},
    }
    for arch in ("llama", "llada"):
        model, log = train_member(arch, work_dir, tokenizer, data, configs[arch], quiet=quiet)
        model = load_evaluation_weights(model, work_dir / arch, best_evaluation(log.evaluations)["step"])
        target = out_dir / arch
        if arch == "llama":
            save_llama(model, tokenizer, target)
        else:
            save_llada(model, tokenizer, target, special["<|mdm_mask|>"], special["<|endoftext|>"])
        summary = member_summary(log.as_dict(), provenance)
        write_training_log(target, {**log.as_dict(), **summary, "corpus_sha256": corpus_info["sha256"]})
        provenance["models"][arch] = summary
    if block_diffusion is not None:
        from miniature.block_diffusion_stage import run_block_diffusion_stage
        from miniature.block_diffusion_train import ARCH

        provenance["models"][ARCH] = run_block_diffusion_stage(
            with_rule_base(block_diffusion, work_dir, tokens), work_dir, out_dir, tokenizer, data, shape_for("llama", len(tokenizer)),
            corpus_info["sha256"], quiet=quiet)
    write_json(out_dir / "provenance.json", provenance)
    write_checksums(out_dir)
    return provenance


def member_summary(log: dict, provenance: dict) -> dict:
    """The numbers a report shows about a member: size, tokens, wall time, and the shipped evaluation
    (the best held-out loss) with the step and tokens at which it was taken."""
    shipped = best_evaluation(log["evaluations"])
    return {
        "parameters": log["parameters"],
        "steps": log["step"],
        "tokens_seen": log["tokens_seen"],
        "shipped_step": shipped["step"],
        "shipped_tokens": shipped["tokens"],
        "wall_s": round(log["wall_s"], 1),
        "heldout_loss_nats": shipped["heldout_loss"],
        "heldout_measure": "next-token cross-entropy" if log["arch"] == "llama" else "masked-diffusion bound (upper bound on NLL)",
        "unigram_entropy_nats": provenance["unigram_entropy_nats"],
        "seed": log["config"]["seed"],
        "training_rule": provenance["training_rule"],
    }


def compare_heldout(provenance: dict, reference_dir: Path, tolerance_nats: float) -> list[str]:
    """Lines comparing each member's final held-out loss with a reference pair's (e.g. the shipped one)."""
    reference_file = reference_dir / "provenance.json"
    if not reference_file.is_file():
        return [f"no {reference_file} to compare with"]
    reference = json.loads(reference_file.read_text(encoding="utf-8"))
    lines = []
    for arch, summary in provenance["models"].items():
        theirs = reference["models"].get(arch, {}).get("heldout_loss_nats")
        if theirs is None:
            lines.append(f"{arch}: the reference has no held-out loss")
            continue
        delta = summary["heldout_loss_nats"] - theirs
        verdict = "within" if abs(delta) <= tolerance_nats else "OUTSIDE"
        lines.append(f"{arch}: held-out {summary['heldout_loss_nats']:.4f} vs reference {theirs:.4f} nats/token "
                     f"(Δ {delta:+.4f}, {verdict} ±{tolerance_nats})")
    return lines
