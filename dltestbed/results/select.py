"""Which stored runs a command names: run ids (whole, or a unique prefix of the id or of its short form), a
bench (its id or a unique prefix, `last`, or a run's id: its bench; `prev` too where two benches are compared),
or every run. One line that says
what the store holds when nothing matches; a notice (`say`) when a run's id stood for its bench."""

from __future__ import annotations

from collections.abc import Callable

from dltestbed.errors import ConfigError
from dltestbed.results import ids as idmod
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store

Say = Callable[[str], None]


def _quiet(line: str) -> None:
    """No notice wanted."""


def bench_named(store: Store, given: str, option: str, say: Say = _quiet) -> str:
    """The bench an id names where a bench is asked for: a bench's id or a unique prefix, or a run's (its bench,
    said to `say`); a ConfigError listing the candidates when it names none, or several."""
    bench_id, notice = idmod.bench_of(given, store.bench_ids(), store.run_benches(), option, str(store.path))
    if notice:
        say(notice)
    return bench_id


def bench_id_of(store: Store, name: str, option: str, say: Say = _quiet) -> str:
    """A bench id from an id (as bench_named reads it), `last`, or `prev` (the one before the last)."""
    ids = store.bench_ids()
    if name in ("last", "prev"):
        want = 1 if name == "last" else 2
        if len(ids) < want:
            raise ConfigError(f"{option} {name}: {store.path} holds {len(ids)} bench(es)")
        return ids[-want]
    return bench_named(store, name, option, say)


def select_runs(store: Store, ids: list[str] | None, bench: str | None, say: Say = _quiet) -> list[RunRecord]:
    """The runs named: ids, a bench's (an id, a prefix, 'last', or a run's id: its bench), or every run; a
    ConfigError saying what the store holds when none is found."""
    if bench == "last":
        bench_id = store.last_bench_id()
    else:
        bench_id = bench_named(store, bench, "--bench", say) if bench is not None else None
    if ids:
        known, benches = store.run_ids(), store.bench_ids()
        for i in ids:
            if i and not idmod.matches(i, known) and len(idmod.matches(i, benches)) == 1:
                raise ConfigError(f"run id: {i!r} is a bench, not a run; give it as --bench {i}")
        ids = [idmod.resolve(i, known, "run", "run id", str(store.path)) for i in ids]
    records = store.runs(ids=ids or None, bench_id=bench_id)
    if not records:
        what = f"bench {bench_id}" if bench_id else "runs"
        raise ConfigError(f"no {what} in {store.path}; run `dltestbed bench` first")
    return records
