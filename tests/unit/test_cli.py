"""The CLI on bad input: one `error:` line naming the problem and what is allowed, non-zero, no
traceback. Also: commands that run no model never import TensorFlow, and every --help reads whole at 80
columns."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dltestbed.results.store import Store
from tests.conftest import one_error_line, run_cli

QUICK = ["--image-size", "64", "--batch-size", "8", "--warmup", "1", "--steps", "3", "--targets", "bm", "--repeat", "1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--model", "vgg16"], "unknown model 'vgg16'; known: inception3, resnet50, alexnet"),
        (["bench", "--model", "alexnet", "--steps", "0"], "--steps: more than 0 (got 0)"),
        (
            ["bench", "--model", "alexnet", "--steps", "-5"],
            "--steps: more than 0 (got -5)",
        ),
        (
            ["bench", "--model", "inception3", "--image-size", "64"],
            "image size 64 is below inception3's minimum of 75 px",
        ),
        (["bench", "--model", "alexnet", "--data", "real"], "--data real needs --data-dir DIR"),
        (
            ["bench", "--model", "alexnet", "--data", "real", "--data-dir", "/nonexistent/imagenet"],
            "data dir '/nonexistent/imagenet' does not exist",
        ),
        (["bench", "--mode", "fit"], "--mode: one of train, infer (got 'fit')"),
        (["bench", "--repeat", "0"], "--repeat: at least 1 (got 0)"),
        (["bench", "--preset", "huge"], "--preset: one of auto, quick, study, gpu (got 'huge')"),
        (["bench", "--suite", "bogus"], "--suite: one of study, micro, full, screen (got 'bogus')"),
        (["bench", "--device", "tpu"], "--device: one of auto, cpu, gpu (got 'tpu')"),
        (["bench", "--steps", "x"], "--steps: a whole number (got 'x')"),
        (["bench", "--targets", "bm,,cbm"], "--targets: a comma-separated list with no empty item (got 'bm,,cbm')"),
        (["bench", "--suite", "micro", "--probes", "gemm,foo"], "--probes: unknown probe 'foo'; known: gemm,"),
        (["bench", "--vm-memory", "3x"], "--vm-memory: a size like 3g or 3072m (got '3x')"),
        (["bench", "--bogus"], "No such option: --bogus"),
        (["bench", "--model", "vgg16"], "--model: unknown model 'vgg16'; known: inception3, resnet50, alexnet"),
        (["bench", "--framework", "jax"], "--framework: unknown framework 'jax'; known: tensorflow or pytorch"),
        (["report", "r-does-not-exist"], "run id: no run 'r-does-not-exist' in"),
        (["runs"], "no runs in"),
        (["report"], "no runs in"),
        (["bench", "--model", "alexnet", "--report", "/proc/no/r.html"], "--report '/proc/no/r.html': cannot write"),
        (["bench", "--model", "alexnet", "--report", "/tmp"], "--report '/tmp': cannot write there (it is a folder)"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, results: Path) -> None:
    Store.open(results).close()  # an empty store: what a read-only command finds is said of it
    proc = run_cli(*args, "--results", str(results))
    line = one_error_line(proc)
    assert message in line, line
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [line]  # the line alone: nothing said before it (the preset auto chose)


def test_a_stop_during_a_check_is_said_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Ctrl-C before the bench's own handling begins (a check under way): exit 130 and a line, not silence."""
    from dltestbed import cli, orchestrate

    def stopped(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrate, "run_bench", stopped)
    assert cli.main(["bench", "--dry-run"]) == 130
    assert capsys.readouterr().err == "error: stopped (Ctrl-C or a stop signal) before it finished\n"


def test_a_rootless_runtime_named_with_targets_auto_needs_its_user_as_cbm_does(results: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the refusal is root's: run as root (CI is)")
    for targets in ("auto", "bm,cbm"):
        proc = run_cli(
            "bench", "--targets", targets, "--runtime", "charliecloud", "--dry-run", "--results", str(results)
        )
        assert "name the user with --as-user NAME" in one_error_line(proc), targets


def test_empty_data_dir(tmp_path: Path, results: Path) -> None:
    (tmp_path / "data" / "cls").mkdir(parents=True)
    proc = run_cli(
        "bench", "--model", "alexnet", "--data", "real", "--data-dir", str(tmp_path / "data"), "--results", str(results)
    )
    assert "has no JPEG images in class subfolders" in one_error_line(proc)


def test_unwritable_results_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for path, msg in [(blocker / "r.sqlite", "cannot be created"), (tmp_path, "is a folder, not a file")]:
        proc = run_cli("bench", "--model", "alexnet", *QUICK, "--results", str(path))
        line = one_error_line(proc)
        assert msg in line and "--results PATH or DLTESTBED_RESULTS" in line
    proc = run_cli("bench", "--model", "alexnet", *QUICK, env={"DLTESTBED_RESULTS": str(blocker / "x")})
    assert "cannot be created" in one_error_line(proc)


def test_data_make_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = run_cli("data", "make", "--data-dir", str(tmp_path), "--classes", "2")
    assert "--data-dir: an empty folder, or add --force to write into it" in one_error_line(proc)
    proc = run_cli("data", "make", "--data-dir", str(tmp_path / "d"), "--image-size", "2")
    assert "--image-size: between 8 and 4096 px (got 2)" in one_error_line(proc)


def test_data_make_writes_a_dataset(tmp_path: Path) -> None:
    proc = run_cli(
        "data",
        "make",
        "--data-dir",
        str(tmp_path / "d"),
        "--classes",
        "2",
        "--images-per-class",
        "3",
        "--image-size",
        "16",
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote 6 JPEGs" in proc.stdout and "in 2 classes" in proc.stdout
    assert len(list((tmp_path / "d").glob("*/*.jpg"))) == 6


def test_a_foreign_sqlite_file_is_refused(results: Path) -> None:
    import sqlite3

    with sqlite3.connect(results) as db:
        db.execute("CREATE TABLE runs (x)")
    line = one_error_line(run_cli("runs", "--results", str(results)))
    assert "is not a dltestbed results store" in line


def test_internal_errors_go_to_the_debug_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dltestbed import cli
    from dltestbed.results import store

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("disk on fire")

    log = tmp_path / "debug.log"
    monkeypatch.setenv("DLTESTBED_DEBUG_LOG", str(log))
    monkeypatch.setattr(store.Store, "open", broken)
    assert cli.main(["runs"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"internal error: RuntimeError: disk on fire (traceback in {log})" in err
    text = log.read_text()
    assert "Traceback" in text and "disk on fire" in text


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["bench", "--help"],
        ["report", "--help"],
        ["data", "make", "--help"],
        ["runs", "--format", "json"],
        ["bench", "--model", "vgg16"],
    ],
)
def test_commands_that_run_no_model_do_not_import_tensorflow(args: list[str], results: Path) -> None:
    code = (
        "import sys; from dltestbed.cli import main; rc = main(sys.argv[1:]); "
        "sys.exit(100 if 'tensorflow' in sys.modules or 'keras' in sys.modules else 0)"
    )
    extra = [] if "--help" in args else ["--results", str(results)]
    proc = subprocess.run([sys.executable, "-c", code, *args, *extra], capture_output=True, text=True)
    assert proc.returncode != 100, "TensorFlow was imported"


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("dltestbed ")


def test_image_build_refuses_an_out_folder_it_cannot_write_before_building() -> None:
    """The folder is checked first, before the container runtime is looked for or anything is built."""
    proc = run_cli("image", "build", "--vm", "yes", "--guest-copy", "/proc/dltestbed-x")
    assert proc.returncode == 2
    assert (
        one_error_line(proc)
        == "error: --guest-copy '/proc/dltestbed-x': cannot write there (No such file or directory)"
    )


def _visible_commands() -> list[str]:
    """Every command path `--help` can be asked of: the root, each command and each subcommand shown."""
    from typer.main import get_command

    from dltestbed.cli import app

    out: list[str] = []

    def walk(path: str, cmd: object) -> None:
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                walk(f"{path} {name}".strip(), sub)

    walk("", get_command(app))
    return out


def _option_rows(lines: list[str]) -> list[str]:
    """The rows of the option and argument boxes, each row's lines joined: a row starts where the name
    column holds something, and goes on while it is blank."""
    rows: list[list[str]] = []
    for line in lines:
        if not line.startswith("│"):
            continue
        cell = line.rstrip().removesuffix("│")
        if line[2:8].strip() or not rows:
            rows.append([cell])
        else:
            rows[-1].append(cell)
    return [" ".join(r) for r in rows]


WIDTH = 80


@pytest.mark.parametrize("path", _visible_commands(), ids=lambda p: p or "dltestbed")
def test_help_fits_80_columns_unbroken(path: str) -> None:
    """At 80 columns every --help keeps to 80 columns; no metavar like <a|b|c> is cut across two lines; no
    help text is cut short with "…"; no option says its default twice; the description's paragraphs are
    wrapped by the terminal, not where the docstring's lines ended (a line that had room for the next
    word is a hard break)."""
    proc = run_cli(*path.split(), "--help", env={"COLUMNS": str(WIDTH)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    name = f"dltestbed {path} --help".replace("  ", " ")
    assert max(len(line) for line in lines) <= WIDTH, name
    for line in lines:
        assert not re.search(r"<[\w.-]*\|[\w|.-]*(\s|$)", line), f"{name}: a metavar cut across lines: {line!r}"
        assert not re.search(r"…\s*│\s*$", line), f"{name}: text cut short: {line!r}"
    for row in _option_rows(lines):
        said = row.lower()
        if "[default:" in said:
            assert said.count("default") == 1, f"{name}: the default said twice: {row!r}"
    first_box = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    description = lines[:first_box]
    for above, below in itertools.pairwise(description):
        if not above.strip() or not below.strip() or "Usage:" in above:
            continue
        room = WIDTH - 2 - len(above.rstrip())  # rich pads the description one column each side
        word = below.split()[0]
        assert room < len(word) + 1 + 4, f"{name}: a hard line break after {above.strip()!r}"


def test_a_docstring_is_reflowed_but_lists_are_kept() -> None:
    from dltestbed.cli.helpstyle import reflow

    doc = """First line.

    A paragraph written
    over three lines
    of a docstring.

    Steps:
    - one
    - two
    """
    assert reflow(doc) == "First line.\n\nA paragraph written over three lines of a docstring.\n\nSteps:\n- one\n- two"


def _command(path: str) -> Any:
    """The click command at `path` (e.g. `image build`), tidied as the CLI does (its examples, its labels)."""
    from typer.main import get_command

    from dltestbed.cli import app
    from dltestbed.cli.helpstyle import tidy

    cmd = get_command(app)
    tidy(cmd)
    for name in path.split():
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return cmd


def _examples(path: str) -> list[str]:
    """The lines of a command's examples block as written, markup and blank lines left out."""
    epilog = _command(path).epilog or ""
    return [re.sub(r"\[/?(?:bold)?\]", "", line).rstrip() for line in epilog.splitlines() if line.strip()]


EXAMPLED = ["bench", "accept", "image build", "provision"]


@pytest.mark.parametrize("path", EXAMPLED)
def test_examples_do_not_wrap_at_80_columns(path: str) -> None:
    """Each line of a command's examples is on one line of its --help at 80 columns, never cut mid-option (the
    accept examples once put `--sign-key ~/.ssh/acceptance` and every comment on lines of their own)."""
    written = _examples(path)
    assert any(line.lstrip().startswith("dltestbed ") for line in written), f"{path}: no example"
    proc = run_cli(*path.split(), "--help", env={"COLUMNS": str(WIDTH)})
    shown = {line.strip() for line in proc.stdout.splitlines()}
    cut = [line for line in written if line.strip() not in shown]
    assert not cut, f"dltestbed {path} --help: example lines wrapped at {WIDTH} columns: {cut}"


@pytest.mark.parametrize("path", EXAMPLED)
def test_examples_parse_and_name_a_real_heading(path: str) -> None:
    """Every `dltestbed` command in the examples parses in today's spelling (its description, after three
    spaces, left out), and the heading its `In full:` line names is in docs/reference.md."""
    from tests.unit.test_docs import ROOT, parse, slugs

    commands, current = [], ""
    for line in _examples(path):
        current += " " + re.split(r"\s{3,}", line.strip())[0]
        if current.endswith("\\"):
            current = current[:-1]
            continue
        if current.split()[0] == "dltestbed":
            commands.append(shlex.split(current)[1:])
        current = ""
    assert commands
    for args in commands:
        parse(args)
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    for heading in re.findall(r'docs/reference\.md, "([^"]+)"', " ".join(_examples(path))):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        assert slug in slugs(reference), f"{path}: no heading {heading!r} in docs/reference.md"


def test_accept_help_names_its_default_stages_frameworks_and_exit_codes() -> None:
    """accept --help at 80 columns: --level says its default in at most 4 lines; --skip names every stage of the
    registry (accept/stages.py), --framework every framework (workload/frameworks); the Exits paragraph names 2
    (bad input, a stage that cannot go on) beside 0, 1 and 3."""
    from dltestbed.accept.stages import SKIPPABLE, STAGES
    from dltestbed.workload.frameworks import REGISTRY

    proc = run_cli("accept", "--help", env={"COLUMNS": str(WIDTH)})
    lines = proc.stdout.splitlines()
    rows = {row.split()[1]: row for row in _option_rows(lines) if len(row.split()) > 1}
    level = next(p for p in _command("accept").params if "--level" in p.opts)
    said = [line for line in lines if line.startswith("│")]
    start = next(i for i, line in enumerate(said) if "--level" in line)
    assert sum(1 for line in said[start + 1 : start + 5] if not line[2:8].strip()) < 4, "--level: over 4 lines"
    assert re.search(rf"default:?\s+{level.default}\b", " ".join(rows["--level"].replace("│", " ").split()))

    def names(option: str, wanted: Any) -> list[str]:
        row = " ".join(rows[option].replace("│", " ").split())
        return [n for n in wanted if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", row)]

    assert not names("--skip", STAGES), f"--skip does not name {names('--skip', STAGES)}"
    assert set(SKIPPABLE) < set(STAGES)
    assert not names("--framework", REGISTRY), f"--framework does not name {names('--framework', REGISTRY)}"
    text = " ".join(" ".join(lines[: next(i for i, x in enumerate(lines) if x.startswith("╭"))]).split())
    exits = re.search(r"Exits (.*?)\.(?:\s|$)", text)
    assert exits is not None
    assert all(re.search(rf"\b{code}\b", exits.group(1)) for code in (0, 1, 2, 3)), exits.group(0)


def test_accept_stage_names_are_read_only_when_its_help_is_shown() -> None:
    """The stage registry imports the whole acceptance (scipy among it, seconds): a command that is not asked
    for accept's help never loads it, though --skip's help names its stages."""
    code = "import sys; from dltestbed.cli import main; main(sys.argv[1:]); sys.exit(100 if '{}' in sys.modules else 0)"
    mod = "dltestbed.accept.stages"
    for args, loaded in ((["--help"], False), (["bench", "--help"], False), (["accept", "--help"], True)):
        proc = subprocess.run([sys.executable, "-c", code.format(mod), *args], capture_output=True, text=True)
        assert (proc.returncode == 100) == loaded, (args, proc.stderr)
