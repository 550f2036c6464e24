"""The checks `llada-bench train` makes on its arguments before any training: a wrong one costs a line, not hours.

Each refusal is one line naming the argument and the fix. What they guard: a `--deb` that is not a Debian package
(dpkg would fail on it only after the work folder is made), a token budget that leaves the block-diffusion member
no AR evaluation to start from (the rule's start is known only once the AR run has trained, so the schedule of its
evaluations is computed here from the same seeded draws), and an `--out` the trainer may not write into.
"""

from __future__ import annotations

from pathlib import Path

from miniature.corpus import DEB_PACKAGE, CorpusError, deb_version
from miniature.pair_folder import check_out
from miniature.trainer import TrainConfig, step_draw

AR_MAGIC = b"!<arch>\n"  # a .deb is an ar archive whose first member is debian-binary (deb(5))
DEB_FIRST_MEMBER = b"debian-binary"
CHOICES_SHOWN = 4


class TrainArgumentError(ValueError):
    """An argument of `llada-bench train` that would fail the run later; one line."""


def check_deb(deb: Path) -> None:
    """TrainArgumentError unless `deb` is a Debian package file named as apt-get names it."""
    wanted = f"give the {DEB_PACKAGE}_<version>_all.deb that `apt-get download {DEB_PACKAGE}` fetches"
    if not deb.is_file():
        raise TrainArgumentError(f"--deb {deb}: no such file; {wanted}")
    with deb.open("rb") as handle:
        head = handle.read(len(AR_MAGIC) + len(DEB_FIRST_MEMBER))
    if head != AR_MAGIC + DEB_FIRST_MEMBER:
        raise TrainArgumentError(f"--deb {deb}: not a Debian package (a .deb is an ar archive that starts with "
                                 f"debian-binary); {wanted}")
    try:
        deb_version(deb)
    except CorpusError as exc:
        raise TrainArgumentError(f"--deb {exc}; {wanted}") from None


def ar_evaluation_tokens(config: TrainConfig, context: int) -> list[int]:
    """The training tokens at each held-out evaluation of an AR run of `config` (miniature/trainer.train evaluates
    every `eval_every` steps and at the last), from the same seeded draws as training."""
    seen, tokens = 0, []
    for step in range(1, config.steps + 1):
        seen += config.batch_size * step_draw("llama", context, config, step - 1)[1]
        if step % config.eval_every == 0 or step == config.steps:
            tokens.append(seen)
    return tokens


def check_fine_tuning(tokens: int, fine_tune_tokens: int, ar_config: TrainConfig, context: int) -> None:
    """TrainArgumentError unless the AR run keeps an evaluation at `tokens − fine_tune_tokens` tokens, where the
    training rule starts the block-diffusion member (pipeline.adapted_start); the error lists budgets that do."""
    evaluations = ar_evaluation_tokens(ar_config, context)
    if tokens - fine_tune_tokens in evaluations:
        return
    fits = sorted((tokens - at for at in evaluations if at < tokens), key=lambda f: abs(f - fine_tune_tokens))
    choices = ", ".join(str(f) for f in sorted(fits[:CHOICES_SHOWN])) or "none"
    raise TrainArgumentError(
        f"--bd-tokens {fine_tune_tokens}: with --tokens {tokens} the block-diffusion member would start from the AR "
        f"run's weights at {tokens - fine_tune_tokens} tokens, and the AR run keeps weights only at its evaluations "
        f"(every {evaluations[0]} tokens): give --bd-tokens one of {choices}, or --bd-base FILE")


def check_arguments(*, deb: Path | None, tokens: int, fine_tune_tokens: int, bd_base: Path | None,
                    ar_config: TrainConfig, context: int, work_dir: Path, out: Path) -> None:
    """Every check above, and the folders': TrainArgumentError (or PairFolderError) on the first that fails."""
    if work_dir.exists() and not work_dir.is_dir():
        raise TrainArgumentError(f"--work-dir {work_dir}: is a file; give a folder for the intermediate files")
    if deb is not None:
        check_deb(deb)
    if bd_base is None:
        check_fine_tuning(tokens, fine_tune_tokens, ar_config, context)
    elif not bd_base.exists():
        raise TrainArgumentError(f"--bd-base {bd_base}: no such file or folder; give an AR member folder or a "
                                 ".safetensors file with `tokens` in its metadata")
    check_out(out)
