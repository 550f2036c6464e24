"""Property: any broken spec yields exactly one line naming a field, exit code 2, never a traceback."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from tests.spec_fixtures import tiny_dict

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10_000), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12), st.sampled_from(["llama", "llada", "tiny", "8b", "sdpa", "../x", "a/b"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, prefix + (index,))
    return found


@st.composite
def broken_specs(draw) -> dict[str, Any]:
    data = tiny_dict()
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(data)))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add_key"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_specs())
def test_broken_spec_gives_one_line(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        spec = Path(directory) / "broken.yaml"
        spec.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["plan", str(spec)])
    if code == 0:  # the mutation happened to leave a valid spec
        assert "runs planned" in out.getvalue()
        return
    message = err.getvalue()
    assert code == 2
    assert "Traceback" not in message
    assert message.count("\n") == 1
    assert message.startswith(f"error: {spec}: ")
    detail = message[len(f"error: {spec}: "):]
    if detail.startswith(("malformed YAML", "a spec must be a mapping")):
        return
    known = {"spec", "name", "models", "grid", "controls", "prompts", "quality", "description"}
    # The field path starts with a top-level key, quoted when it is not a plain word.
    # (YAML may normalise an odd key, e.g. a NEL character, so any quoted key is accepted.)
    starts = tuple(known | {str(k) for k in data}) + ("'", '"')
    assert detail.startswith(starts), detail
    assert ": " in detail
