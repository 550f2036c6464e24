"""constraints.txt, the CPU install's exact versions, stays in step with the GPU image's lock."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# Pinned differently by design: torch (the 2.13 CPU wheel here, the CUDA 12.6 build of 2.7.1 in the image),
# and packages whose locked release needs Python >= 3.12 (the image runs 3.13, the CPU install 3.11+).
DIFFERENT_BY_DESIGN = {"torch", "numpy", "scipy", "networkx", "contourpy"}
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_every_package_both_files_pin_has_one_version() -> None:
    constraints, lock = _pins(ROOT / "constraints.txt"), _pins(ROOT / "container" / "requirements.lock")
    shared = set(constraints) & set(lock)
    assert {"transformers", "tokenizers", "pydantic", "ray", "safetensors"} <= shared
    differ = {name: (constraints[name], lock[name]) for name in shared - DIFFERENT_BY_DESIGN if constraints[name] != lock[name]}
    assert differ == {}, "constraints.txt and container/requirements.lock disagree (constraints, lock)"


def test_the_constraints_satisfy_pyprojects_ranges() -> None:
    """A pin outside pyproject's range would make `pip install -c constraints.txt -e .` unresolvable."""
    constraints = _pins(ROOT / "constraints.txt")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    for requirement in map(Requirement, requirements):
        name = requirement.name.lower().replace("_", "-")
        assert name in constraints, f"{name} is a dependency but constraints.txt does not pin it"
        assert requirement.specifier.contains(constraints[name], prereleases=True), (name, constraints[name])


def test_ci_and_both_readme_commands_install_with_the_constraints() -> None:
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    assert "pip install --no-compile -c constraints.txt -e . && just sweep" in readme
    test_command = "python3 -m venv .venv && . .venv/bin/activate && pip install --no-compile -c constraints.txt -e '.[test]' && just test"
    assert test_command in readme.splitlines()
    # CI runs exactly the README's test command, keeping its exit status to report beside the image stages'
    assert f"{test_command} || tests=$?" in ci.splitlines()
