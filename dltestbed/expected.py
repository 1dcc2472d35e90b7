"""What a healthy GPU of each board reaches: dltestbed's expected values, shipped as data (`dltestbed/boards/`,
one versioned TOML file a board), each value with its source (a datasheet, or a measurement on a named machine
with its date). A figure dltestbed measures (GEMM, copies, launches, ResNet-50) is a value only as dltestbed's own
probe or model read it on a healthy board: it names the store it was computed from, the framework and the
revision of the probe or model (`Measured`), and judges only a run of the same framework and revision. A site
overrides any value with a file of its own in the same form, a table a board that gives only what it changes. A
GPU whose board has no file, or a value its board's file lacks, is judged against its peers alone. Pure data and
lookups: acceptance judges with them."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from dltestbed.choices import FRAMEWORKS
from dltestbed.errors import ConfigError

FORMAT = 1  # the version a board file declares
# Each value's name, what it is, its unit: the names a board file may use.
VALUES: Mapping[str, tuple[str, str]] = {
    "pcie_gen": ("the PCIe generation of the link at its maximum", ""),
    "pcie_width": ("the PCIe link's width at its maximum", "lanes"),
    "memory_gb": ("memory, as the datasheet prints it", "GB"),
    "power_limit_w": ("the default power limit", "W"),
    "memory_bandwidth_tbs": ("memory bandwidth", "TB/s"),
    "gemm_float32": ("GEMM, float32 with TF32 off, as a fraction of the datasheet's dense peak", ""),
    "gemm_tf32": ("GEMM, TF32, as a fraction of the datasheet's dense peak", ""),
    "gemm_bfloat16": ("GEMM, bfloat16, as a fraction of the datasheet's dense peak", ""),
    "gemm_float16": ("GEMM, float16, as a fraction of the datasheet's dense peak", ""),
    "memory_copy_fraction": ("a device-to-device copy (read + write) as a fraction of memory bandwidth", ""),
    "h2d_pinned_fraction": ("host to device from pinned memory, as a fraction of the PCIe link", ""),
    "d2h_pinned_fraction": ("device to host into pinned memory, as a fraction of the PCIe link", ""),
    "kernel_launches_per_s": ("empty kernels launched a second", "1/s"),
    "allreduce_busbw_gbs": ("all-reduce bus bandwidth across the node's GPUs", "GB/s"),
    "resnet50_gpu_preset_ips": ("ResNet-50 in the gpu preset", "img/s"),
}
FIELDS = ("version", "board", "match", "exclude", "values")  # what a board file (a site's table) gives
SOURCE_KINDS = ("datasheet: ", "measured: ")  # how a source starts
# The values that are figures of dltestbed's own probes and models: each names its store, framework and revision.
MEASURED = (
    "gemm_float32",
    "gemm_tf32",
    "gemm_bfloat16",
    "gemm_float16",
    "memory_copy_fraction",
    "h2d_pinned_fraction",
    "d2h_pinned_fraction",
    "kernel_launches_per_s",
    "allreduce_busbw_gbs",
    "resnet50_gpu_preset_ips",
)


@dataclass(frozen=True)
class Measured:
    """Where a measured value comes from: the store it was computed from (a path; the shipped boards' are under
    the repository's tests/data), and the framework and revision of the probe or model that measured it."""

    store: str
    framework: str
    revision: int

    def differs(self, framework: str, revision: int) -> str | None:
        """Why a run of this framework and revision cannot be judged by the value (None: it can)."""
        if (framework, revision) == (self.framework, self.revision):
            return None
        return (
            f"its board's value was measured with {self.framework} at revision {self.revision}, this GPU's figure "
            f"with {framework} at revision {revision}: measure the board again (accept --init on a healthy one)"
        )


@dataclass(frozen=True)
class Value:
    """One expected value and where it comes from."""

    name: str
    value: float
    source: str
    measured: Measured | None = None  # a figure of dltestbed's probes and models: where, with what, which revision

    @property
    def unit(self) -> str:
        """Its unit ("" for a count or a fraction)."""
        return VALUES[self.name][1]


@dataclass(frozen=True)
class Board:
    """A board's expected values, and the NVML names that are this board: each of `match` in the name, none of
    `exclude`."""

    key: str  # its file's name without .toml
    board: str
    version: int
    match: tuple[str, ...]
    exclude: tuple[str, ...]
    values: Mapping[str, Value]

    def fits(self, gpu_name: str) -> bool:
        """Whether a GPU of this NVML name is this board."""
        return all(m in gpu_name for m in self.match) and not any(x in gpu_name for x in self.exclude)

    def get(self, name: str) -> Value | None:
        """The expected value of this name, or None: judged against peers alone."""
        if name not in VALUES:
            raise KeyError(name)
        return self.values.get(name)


def _parse(key: str, data: Mapping[str, Any], where: str, over: Board | None = None) -> Board:
    """A board file's content, checked: one ConfigError line naming the file and what is wrong. `over`: the
    shipped board a site's table overrides, which then gives only what it changes: `version` and `board` are
    that board's where the table leaves them out (a version it gives is still checked), `match` and `exclude`
    always are, and the values it gives replace those of the same name."""

    def need(field: str, kind: type | tuple[type, ...]) -> Any:
        if over is not None and field not in data:
            return getattr(over, field) if field != "values" else {}
        if not isinstance(data.get(field), kind):
            raise ConfigError(f"{where}: `{field}` is missing or not a {getattr(kind, '__name__', 'value')}")
        return data[field]

    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; a board gives {', '.join(FIELDS)}")
    version = need("version", int)
    if version != FORMAT:
        raise ConfigError(f"{where}: version {version}; this dltestbed reads board files of version {FORMAT}")
    board = need("board", str)
    match, exclude = (over.match, over.exclude) if over is not None else ((), ())
    if over is None:
        match = tuple(need("match", list))
        exclude = tuple(data.get("exclude", []))
        if not match or not all(isinstance(m, str) and m for m in (*match, *exclude)):
            raise ConfigError(f"{where}: `match` and `exclude` are lists of parts of a GPU's NVML name")
    values = {}
    for name, entry in need("values", dict).items():
        if name not in VALUES:
            raise ConfigError(f"{where}: unknown value {name!r}; known: {', '.join(VALUES)}")
        value, source = (entry.get("value"), entry.get("source")) if isinstance(entry, dict) else (None, None)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{where}: {name}: `value` must be a positive number")
        if not isinstance(source, str) or not source.startswith(SOURCE_KINDS) or len(source) < 20:
            raise ConfigError(
                f"{where}: {name}: `source` must say where the value comes from, starting with "
                f"{' or '.join(repr(k.strip()) for k in SOURCE_KINDS)} (a datasheet, or a named machine and a date)"
            )
        values[name] = Value(name, float(value), source, _measured(name, entry, f"{where}: {name}"))
    return Board(key, board, version, match, exclude, values)


def _measured(name: str, entry: Mapping[str, Any], where: str) -> Measured | None:
    """A MEASURED value's store, framework and revision, checked (one ConfigError line); None for the others."""
    if name not in MEASURED:
        extra = sorted({"store", "framework", "revision"} & set(entry))
        if extra:
            raise ConfigError(f"{where}: `{extra[0]}` is for a figure dltestbed measures, not for this value")
        return None
    store, framework, revision = entry.get("store"), entry.get("framework"), entry.get("revision")
    if not str(entry.get("source", "")).startswith("measured: "):
        raise ConfigError(f"{where}: a figure dltestbed measures: its source starts with 'measured: '")
    if not isinstance(store, str) or not store:
        raise ConfigError(f"{where}: `store` must name the results store the value was computed from")
    if framework not in FRAMEWORKS:
        raise ConfigError(f"{where}: `framework` must be one of {', '.join(FRAMEWORKS)} (the one that measured it)")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise ConfigError(f"{where}: `revision` must be the probe's or model's revision that measured it (1 or more)")
    return Measured(store, framework, revision)


def shipped() -> tuple[Board, ...]:
    """dltestbed's own board files, in file-name order."""
    folder = resources.files("dltestbed") / "boards"
    out = []
    for f in sorted((p for p in folder.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
        key = f.name.removesuffix(".toml")
        out.append(_parse(key, tomllib.loads(f.read_text(encoding="utf-8")), f"dltestbed/boards/{f.name}"))
    return tuple(out)


def with_site(boards: Sequence[Board], site: Path) -> tuple[Board, ...]:
    """The boards with a site's file applied: `[boards.<key>]` tables (a board's file name without .toml) in the
    form of a board file. A shipped board's table gives only what it changes (the values, each with its own
    source; `board`, `version` where it wants), the rest stays the board's; a board not shipped is a whole
    board file (`version`, `board`, `match`, its values). One ConfigError line for a file that cannot be read or
    is wrong."""
    try:
        data = tomllib.loads(site.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"expected values {str(site)!r} cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"expected values {str(site)!r}: not TOML ({exc})") from None
    tables = data.get("boards")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"expected values {str(site)!r}: no [boards.<name>] table")
    out = {b.key: b for b in boards}
    for key, table in tables.items():
        where = f"{site} [boards.{key}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: not a table")
        ours = out.get(key)
        got = _parse(key, table, where, over=ours)
        out[key] = replace(ours, board=got.board, values={**ours.values, **got.values}) if ours is not None else got
    return tuple(out.values())


def for_gpu(gpu_name: str, boards: Sequence[Board]) -> Board | None:
    """The board a GPU of this NVML name is, or None (judged against its peers alone); a ConfigError when two
    boards claim it (their `match` and `exclude` overlap)."""
    found = [b for b in boards if b.fits(gpu_name)]
    if len(found) > 1:
        raise ConfigError(f"{gpu_name!r} fits boards {found[0].key} and {found[1].key}: make one `exclude` it")
    return found[0] if found else None


def unknown_board(gpu_name: str) -> str:
    """What the report says of a GPU with no board file."""
    return f"{gpu_name}: no expected values for this board; judged against its peers alone"
