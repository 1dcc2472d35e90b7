"""What a provisioning is asked (ProvisionRequest), in groups: each one panel of `dltestbed provision --help`, its
options declared here once (dltestbed/panels.py). Pure data: the CLI imports it for `--help`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

from dltestbed.choices import LAYOUTS, OTHER_FRAMEWORKS, LayoutName
from dltestbed.panels import GROUP_HELP, comma_tuple, opt, repeated


@dataclass(frozen=True)
class Hosts:
    """Which hosts: a layout of an inventory's, the ones `limit` names, the roles' groups (ROLE=GROUP items)."""

    PANEL: ClassVar[str] = "Where"
    DEFAULTS_SHOWN: ClassVar[bool] = True

    layout: Annotated[LayoutName, opt("--layout", metavar="NAME", help=f"{', '.join(LAYOUTS)}.")]
    inventory: Annotated[Path, opt("--inventory", metavar="FILE", help="Ansible inventory, YAML/INI.")]
    limit: Annotated[str | None, opt("--limit", metavar="PATTERN", help="Only these hosts or groups.")] = None
    groups: Annotated[
        tuple[str, ...],
        opt("--group", metavar="ROLE=GROUP", help=GROUP_HELP, cli=list[str] | None, parse=repeated, given=None),
    ] = ()


@dataclass(frozen=True)
class Install:
    """What goes on them: the frameworks beside the default, the user `bench --as-user` runs as, or only what
    would change."""

    PANEL: ClassVar[str] = "What to install"
    DEFAULTS_SHOWN: ClassVar[bool] = True

    frameworks: Annotated[
        tuple[str, ...],
        opt(
            "--framework",
            metavar="NAME",
            help=f"Also install this framework beside the default: {OTHER_FRAMEWORKS}.",
            cli=str | None,
            parse=comma_tuple,
            given=None,
        ),
    ] = ()
    # made on every host (the run_user role)
    run_user: Annotated[
        str | None,
        opt(
            "--as-user",
            metavar="NAME",
            help="Also make this unprivileged user on every host (home, subordinate uids and gids), and check that it "
            "can start the workload: what `bench --as-user NAME` runs as.",
        ),
    ] = None
    check: Annotated[bool, opt("--check", help="Ansible check mode: what would change.")] = False


@dataclass(frozen=True)
class ProvisionRequest:
    """One provisioning: `provision.provision(ProvisionRequest(...))`."""

    hosts: Hosts
    install: Install = field(default_factory=Install)
