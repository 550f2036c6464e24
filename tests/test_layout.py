"""The README's layout table matches the tree: every folder it names exists, and report/ never imports workers/
(the report runs on artifacts alone, on a machine without torch)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUT_HEADING = "### How the code is laid out"
MAX_FLAT_MODULES = 16  # about 15: a folder a reader can read whole


def layout_folders(readme: str) -> list[str]:
    """The first cell of each row of the layout table: the folders it names, as written (`report/answer/`)."""
    section = readme.split(LAYOUT_HEADING, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([^`]+/)` \|", section, flags=re.M)


def imported_modules(source: Path) -> set[str]:
    """Every module `source` imports by absolute name, wherever the import stands (functions included)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    return modules


def test_layout_table_names_only_folders_that_exist() -> None:
    folders = layout_folders((ROOT / "README.md").read_text(encoding="utf-8"))
    assert {"report/", "report/analysis/", "report/answer/", "orchestrator/gpu_round/", "workers/samplers/"} <= set(
        folders
    ), folders
    missing = [folder for folder in folders if not (ROOT / folder).is_dir()]
    assert not missing, f"the README's layout table names folders that are not in the tree: {missing}"


def test_layout_table_parser_sees_a_missing_folder() -> None:
    readme = f"{LAYOUT_HEADING}\n\n| folder | what |\n|---|---|\n| `report/` | x |\n| `report/gone/` | y |\n\n## Next\n"
    folders = layout_folders(readme)
    assert folders == ["report/", "report/gone/"] and not (ROOT / folders[1]).is_dir()


def test_no_report_module_imports_workers() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "workers")
        for path in sorted((ROOT / "report").rglob("*.py"))
    }
    offenders = {path: modules for path, modules in offenders.items() if modules}
    assert not offenders, f"report/ must run without workers/ (torch): {offenders}"


def test_import_scan_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from workers.samplers import ar_steps\n    import workers.runner as r\n")
    assert imported_modules(module) == {"workers.samplers", "workers.runner"}


def test_no_flat_folder_of_the_report_the_round_or_the_samplers_over_about_fifteen_modules() -> None:
    folders = [ROOT / "report", ROOT / "orchestrator" / "gpu_round", ROOT / "workers" / "samplers"]
    crowded = {}
    for init in (init for folder in folders for init in folder.rglob("__init__.py")):
        modules = [p for p in init.parent.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}]
        if len(modules) > MAX_FLAT_MODULES:
            crowded[str(init.parent.relative_to(ROOT))] = len(modules)
    assert not crowded, f"folders over {MAX_FLAT_MODULES} modules: {crowded}"
