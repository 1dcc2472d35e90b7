"""Remedies (dltestbed/remedy.py): Slurm's drain and resume command lines, a site's hook with its {node} and
{reason} put in its words and run without a shell (a reason stays one literal argument), dry-run unless asked,
bad values refused in one line before anything runs."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from dltestbed import remedy
from dltestbed.errors import ConfigError
from dltestbed.remedy.base import Command

WHY = 'GPU 3: XID 79 (fallen off the bus); "drain" $(rm -rf /) `id`\nsecond line'


def argv(spec: str, node: str, why: str = "") -> tuple[str, ...]:
    act = remedy.action(spec, node, bool(why), why)
    assert isinstance(act, Command)
    return act.argv


def test_drain_and_resume_are_scontrol_updates_with_the_reason() -> None:
    drain = argv("drain", "gpu-a1", WHY)
    assert drain[:4] == ("scontrol", "update", "nodename=gpu-a1", "state=drain")
    assert drain[4] == 'reason=dltestbed: GPU 3: XID 79 (fallen off the bus); "drain" $(rm -rf /) `id` second line'
    assert argv("resume", "gpu-a1") == ("scontrol", "update", "nodename=gpu-a1", "state=resume")
    long = argv("drain", "n1", "x" * 500)[4]
    assert len(long) == len("reason=") + remedy.REASON_MAX and long.endswith("…")


def test_a_sites_hook_runs_without_a_shell_and_the_reason_stays_one_argument(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    script = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"
    spec = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {out} --node {{node}} --why {{reason}} at-{{node}}"
    remedy.check_spec(spec, "--on-fail")
    r = remedy.Remedy("gpu-a1", remedy.action(spec, "gpu-a1", True, WHY), "fail")
    (dry,) = remedy.apply([r])
    assert not dry.ran and dry.line.startswith("would run (dry run; --apply runs it): ") and not out.exists()
    (done,) = remedy.apply([r], dry_run=False)
    assert (done.ran, done.returncode) == (True, 0)
    assert json.loads(out.read_text()) == [
        "--node", "gpu-a1", "--why", remedy.REASON_PREFIX + " ".join(WHY.split()), "at-gpu-a1",
    ]  # fmt: skip
    assert not (Path("/") / "rm").exists()  # nothing of the reason ran


def test_a_failing_command_is_reported_and_the_rest_still_run() -> None:
    rs = [
        remedy.Remedy("n1", Command(("no-such-command-here", "x")), "fail"),
        remedy.Remedy("n2", Command(("true",)), "fail"),
    ]
    first, second = remedy.apply(rs, dry_run=False)
    assert (first.returncode, first.said) == (127, "no-such-command-here: command not found")
    assert second.returncode == 0 and second.line == "ran true: exit 0"


@pytest.mark.parametrize(
    ("spec", "option", "message"),
    [
        ("", "--on-fail", r"--on-fail: empty; give 'drain' or 'taint' or 'label', or a command"),
        ("notify {host}", "--on-fail", r"--on-fail: unknown placeholder \{host\}; a command may use \{node\} and"),
        ("notify 'unclosed {node}", "--on-fail", r"--on-fail: No closing quotation in"),
        ("   ", "--on-pass", r"--on-pass: empty; give 'resume' or 'untaint' or 'label'"),
        ("drain", "--on-pass", r"--on-pass drain: drain is for --on-fail$"),
        ("untaint", "--on-fail", r"--on-fail untaint: untaint is for --on-pass$"),
    ],
)
def test_bad_remedies_are_one_line(spec: str, option: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        remedy.check_spec(spec, option)


@pytest.mark.parametrize("node", ["-rf", "--help", "a b", "gpu;reboot", ""])
def test_a_node_name_that_could_be_an_option_or_code_is_refused(node: str) -> None:
    with pytest.raises(ConfigError, match="not a host name a remedy may be run for"):
        remedy.action("drain", node, True, "why")
