"""The graph campaign: one lease measures both pairings (vanilla vs vanilla, and each model's fastest
implementation) at batch 1, 8 and 64, and its plan fits the 25 minutes it is given."""

from __future__ import annotations

from orchestrator.plan import plan_runs, predict_plan
from specs.loader import PACKAGE_ROOT, load_spec

SPEC = PACKAGE_ROOT / "specs" / "campaign-graphs.yaml"
BUDGET_S = 25 * 60


def test_graph_campaign_plans_within_its_budget_on_an_h100_profile() -> None:
    spec = load_spec(SPEC)
    estimate = predict_plan(spec, plan_runs(spec))
    assert estimate is not None and estimate.hardware == "h100-sxm"
    assert 60 < estimate.total_s <= BUDGET_S


def test_graph_campaign_runs_every_implementation_at_every_batch() -> None:
    planned = [r.config for r in plan_runs(load_spec(SPEC))]
    seen = {(c.model.arch, getattr(c.llada_impl or c.llama_impl, "name", "vanilla"), c.batch_size) for c in planned}
    llada = {"vanilla", "dual-cache", "graph", "dual-cache-graph"}
    llama = {"vanilla", "static-compile", "compile-live"}
    for batch in (1, 8, 64):
        assert {("llada", name, batch) for name in llada} <= seen
        assert {("llama", name, batch) for name in llama} <= seen
    graph = [c for c in planned if c.llada_impl is not None and c.llada_impl.graph]
    assert graph and all(c.timed_steps is None for c in graph)  # a graph variant always runs in full
    live = [c for c in planned if c.llama_impl is not None and c.llama_impl.decode_attention == "live"]
    assert {c.batch_size for c in live} == {1, 8, 64}
