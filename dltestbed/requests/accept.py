"""What an acceptance is asked (AcceptRequest), in groups: each one panel of `dltestbed accept --help`, its options
declared here once (dltestbed/panels.py). Pure data: the CLI imports it for `--help`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

from dltestbed.choices import DEFAULT_FRAMEWORK, FRAMEWORKS, LEVELS, UNREACHABLE, or_list
from dltestbed.panels import opt, repeated, seconds
from dltestbed.report import FLEET_MIN_SLOWDOWN
from dltestbed.requests.launch import Kubeconfig
from dltestbed.results import RESULTS_HELP

LEVEL = "quick"  # --level's default
# At most 4 lines at 80 columns; each level in full: docs/reference.md (and choices.LEVELS).
LEVEL_HELP = f"{or_list(LEVELS)} (default: {LEVEL}): minutes a node, longer runs, or those then held for hours."
SKIP_HELP = "A stage not to run; repeatable."  # the stages' names are added when --help is shown (cli/accept.py)


@dataclass(frozen=True)
class Nodes:
    """Which nodes, measured how much and how many at once."""

    PANEL: ClassVar[str] = "What to run"
    DEFAULTS_SHOWN: ClassVar[bool] = True

    inventory: Annotated[
        Path, opt("--inventory", metavar="FILE", help="Ansible inventory of the nodes (group bare_metal).")
    ]
    level: Annotated[str, opt("--level", metavar="NAME", help=LEVEL_HELP)] = LEVEL  # levels.LEVELS
    # stages not to run (stages.STAGES' names)
    skip: Annotated[
        tuple[str, ...],
        opt("--skip", metavar="STAGE", help=SKIP_HELP, cli=list[str] | None, parse=repeated, given=None),
    ] = ()
    # None: the one installed on every node (preflight reads it), the default first
    framework: Annotated[
        str | None,
        opt(
            "--framework",
            metavar="NAME",
            help=f"What the models compute with: {or_list(FRAMEWORKS)} (default: the one every node has; "
            f"{DEFAULT_FRAMEWORK} where they have more).",
        ),
    ] = None
    # burn-in: how long (None: the level's)
    hold_seconds: Annotated[
        float | None,
        opt(
            "--hold", metavar="DURATION", help="burn-in: how long, e.g. 4h (default 4h).", cli=str | None, parse=seconds
        ),
    ] = None
    limit: Annotated[str | None, opt("--limit", metavar="PATTERN", help="Only these hosts or groups.")] = None
    # nodes measured at once at most (None: all at once; 1: one after another)
    parallel: Annotated[
        int | None,
        opt("--parallel", metavar="N", help="Measure at most N nodes at once (default: every node at once)."),
    ] = None


@dataclass(frozen=True)
class Judging:
    """What a node is judged against."""

    PANEL: ClassVar[str] = "Judging"
    DEFAULTS_SHOWN: ClassVar[bool] = True

    # a golden spec of facts (YAML: fact → value); else the fleet's majority
    golden: Annotated[
        Path | None,
        opt(
            "--golden",
            metavar="FILE",
            help="A golden spec (YAML, fact: value) for the drift check; else the fleet's majority.",
        ),
    ] = None
    # a site's expected values per board, over the shipped ones
    expected: Annotated[
        Path | None,
        opt("--expected", metavar="FILE", help="The site's expected values per board (TOML), over the shipped ones."),
    ] = None
    # % below its peers' median a node must be (with z < −3.5) to be slow
    slowdown: Annotated[
        float, opt("--slowdown", metavar="PCT", help="A node this far below its peers' median is slow (default: 5).")
    ] = FLEET_MIN_SLOWDOWN
    # the verdict of a node left out: cannot judge (the default), or fail
    unreachable: Annotated[
        str,
        opt(
            "--unreachable",
            metavar="VERDICT",
            help=f"A node that cannot be reached, provisioned or measured: {' or '.join(UNREACHABLE)} "
            "(the first default).",
        ),
    ] = UNREACHABLE[0]


@dataclass(frozen=True)
class Pack:
    """Where the evidence goes, and what is done after."""

    PANEL: ClassVar[str] = "The pack, and after"
    DEFAULTS_SHOWN: ClassVar[bool] = True

    # the evidence pack's folder (and the acceptance's progress, for --resume)
    out: Annotated[Path, opt("--out", metavar="DIR", help="The evidence pack's folder (and --resume's).")] = Path(
        "acceptance"
    )
    resume: Annotated[
        bool,
        opt("--resume", help="Go on with the acceptance in --out: no finished stage again; the nodes left out again."),
    ] = False
    # an SSH private key: the pack's manifest is signed with it
    sign_key: Annotated[
        Path | None, opt("--sign-key", metavar="FILE", help="Sign the pack's manifest with this SSH key.")
    ] = None
    # a built-in remedy's name (dltestbed/remedy/), or a site's command with {node} and {reason}
    on_fail: Annotated[
        str | None,
        opt(
            "--on-fail",
            metavar="CMD",
            help="For a failed node: drain (Slurm), taint or label (Kubernetes), or a command with {node}, {reason}.",
        ),
    ] = None
    # a built-in remedy's name, or a site's command
    on_pass: Annotated[
        str | None,
        opt(
            "--on-pass",
            metavar="CMD",
            help="For a node that passes: resume (Slurm), untaint or label (Kubernetes), or a command.",
        ),
    ] = None
    # the cluster of taint, untaint and label (None: the inventory's dltestbed_kubeconfig, else $KUBECONFIG)
    kubeconfig: Kubeconfig = None
    # run the remedies (else they are shown, a dry run)
    apply: Annotated[bool, opt("--apply", help="Run --on-fail and --on-pass (else they are only shown).")] = False
    # the store its benches go to (None: the default)
    results: Annotated[Path | None, opt("--results", metavar="FILE", help=RESULTS_HELP)] = None


@dataclass(frozen=True)
class AcceptRequest:
    """One acceptance of an inventory's nodes: `accept.run_accept(AcceptRequest(...), observer)`."""

    nodes: Nodes
    judging: Judging = field(default_factory=Judging)
    pack: Pack = field(default_factory=Pack)
