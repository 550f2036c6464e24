"""Which models of a sweep the report compares: each diffusion model with its autoregressive peers, per pair.

A pair is (an autoregressive model, a diffusion model) of the sweep. A diffusion model whose registry family names
a `peer` family (LLaDA: LLaMA; Dream: Qwen2.5) pairs with the sweep's models of that family when there are any,
else with every autoregressive model of the sweep. Every analysis that sets the two paradigms side by side (the
crossover, S_parity, the pairings, the verdict) runs per pair, and the text names each side by the family titles
of the pairs present (`sides_of`), so a sweep of LLaMA and LLaDA reads as it always has.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from specs.registry import ARCHS, family

AUTOREGRESSIVE, DIFFUSION = "autoregressive", "diffusion"
# How the text names a side when the pairs present do not share one family on it.
GENERIC_AR, GENERIC_DLLM = "AR", "dLLM"


@dataclass(frozen=True)
class Pair:
    """One autoregressive model and one diffusion model of a sweep, compared with each other."""

    ar_model: str
    ar_arch: str
    dllm_model: str
    dllm_arch: str

    @property
    def ar_title(self) -> str:
        return family(self.ar_arch).title

    @property
    def dllm_title(self) -> str:
        return family(self.dllm_arch).title

    @property
    def heading(self) -> str:
        """'llada-8b (LLaDA) vs llama-8b (LLaMA)': how a pair heads its part of the report."""
        return f"{self.dllm_model} ({self.dllm_title}) vs {self.ar_model} ({self.ar_title})"


@dataclass(frozen=True)
class Sides:
    """How the text names the autoregressive side and the diffusion side (a family title, or generic)."""

    ar: str
    dllm: str


def paradigm_of(arch: str) -> str:
    return family(arch).paradigm


def paradigm_column(arch: pl.Expr | str = "arch") -> pl.Expr:
    """The registry paradigm of each row's arch, as an expression (for frames built without the column)."""
    column = pl.col(arch) if isinstance(arch, str) else arch
    return column.replace_strict({name: family(name).paradigm for name in ARCHS}, default=None,
                                 return_dtype=pl.String)


def is_ar() -> pl.Expr:
    """Rows of autoregressive models (the `arch` column read through the registry)."""
    return paradigm_column() == AUTOREGRESSIVE


def is_dllm() -> pl.Expr:
    """Rows of diffusion models."""
    return paradigm_column() == DIFFUSION


def pairs_from(models: Iterable[tuple[str, str]]) -> list[Pair]:
    """The pairs of a set of (model, arch): each diffusion model with the autoregressive models of its registry
    peer family where the set has any, else with every autoregressive model. In registry order of the diffusion
    families, then by model name."""
    distinct = sorted(set(models), key=lambda m: (ARCHS.index(m[1]), m[0]))
    ar = [(m, a) for m, a in distinct if paradigm_of(a) == AUTOREGRESSIVE]
    out = []
    for model, arch in distinct:
        if paradigm_of(arch) != DIFFUSION:
            continue
        peer = family(arch).peer
        peers = [(m, a) for m, a in ar if a == peer] or ar
        out += [Pair(ar_model=m, ar_arch=a, dllm_model=model, dllm_arch=arch) for m, a in peers]
    return out


def sweep_pairs(table: pl.DataFrame) -> list[Pair]:
    """The pairs of a flat table's models (every row, whatever its status)."""
    if not table.height:
        return []
    return pairs_from(table.select("model", "arch").unique().iter_rows())


def peers_of(pairs: Sequence[Pair], dllm_model: str) -> list[str]:
    """The autoregressive models a diffusion model is compared with, sorted."""
    return sorted(p.ar_model for p in pairs if p.dllm_model == dllm_model)


def pair_of(pairs: Sequence[Pair], ar_model: str, dllm_model: str) -> Pair | None:
    return next((p for p in pairs if p.ar_model == ar_model and p.dllm_model == dllm_model), None)


def sides_of(pairs: Sequence[Pair]) -> Sides:
    """Each side's family title when every pair has the same family there (LLaMA, LLaDA), else AR or dLLM."""
    return Sides(ar=_title({p.ar_arch for p in pairs}, GENERIC_AR), dllm=_title({p.dllm_arch for p in pairs}, GENERIC_DLLM))


def table_sides(table: pl.DataFrame) -> Sides:
    """The sides of a flat table's pairs. A table with one paradigm only names its families, and the other side by
    the families peered with them (a LLaMA-only sweep still speaks of LLaDA)."""
    pairs = sweep_pairs(table)
    if pairs:
        return sides_of(pairs)
    archs = set(table["arch"].drop_nulls().to_list()) if table.height else set()
    ar = {a for a in archs if paradigm_of(a) == AUTOREGRESSIVE}
    dllm = {a for a in archs if paradigm_of(a) == DIFFUSION}
    ar |= {family(a).peer for a in dllm if family(a).peer}
    dllm |= {name for name in ARCHS if family(name).peer in ar}
    return Sides(ar=_title(ar, GENERIC_AR), dllm=_title(dllm, GENERIC_DLLM))


def _title(archs: set, generic: str) -> str:
    titles = {family(a).title for a in archs}
    return titles.pop() if len(titles) == 1 else generic
