"""Run and bench ids, long and short. An id is `r-YYYYmmdd-HHMMSS-xxxxxx`; its short form is the random
part (`xxxxxx`), as `docker ps` shows a short id. Any prefix of either that names one id names it."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.errors import ConfigError

SHOWN = 5  # candidates a refusal lists


def short(full: str) -> str:
    """The id's random part: what `dltestbed runs` shows and every command accepts."""
    return full.rsplit("-", 1)[-1]


def matches(given: str, known: Sequence[str]) -> list[str]:
    """The ids `given` names: itself, else every id it is a prefix of, whole or short."""
    if given in known:
        return [given]
    return [k for k in known if k.startswith(given) or short(k).startswith(given)]


def resolve(given: str, known: Sequence[str], what: str, option: str, where: str) -> str:
    """The one id `given` names among `known`, or a ConfigError listing what it could have been."""
    hits = matches(given, known) if given else []
    if len(hits) == 1:
        return hits[0]
    if hits:
        listed = ", ".join(short(h) for h in hits[:SHOWN]) + (" …" if len(hits) > SHOWN else "")
        raise ConfigError(f"{option}: {given!r} names {len(hits)} {what}s ({listed}); give more of its id")
    latest = ", ".join(short(k) for k in known[-SHOWN:][::-1])
    some = f"; the latest: {latest}" if known else f"; there is no {what} yet"
    listing = "dltestbed runs --benches" if what == "bench" else "dltestbed runs"
    raise ConfigError(f"{option}: no {what} {given!r} in {where}{some} (see `{listing}`)")


def bench_of(
    given: str, benches: Sequence[str], runs: Sequence[tuple[str, str]], option: str, where: str
) -> tuple[str, str | None]:
    """The bench `given` names where a bench is asked for, and the notice to print when it named it through
    a run: a bench's id (whole, short, or a unique prefix), else a run's (its bench: `runs` shows both ids,
    and either names the bench). `runs`: (run id, its bench id) pairs. A ConfigError when it names none, or
    runs of several benches."""
    if given and not matches(given, benches):
        hits = matches(given, [r for r, _ in runs])
        owner = dict(runs)
        owners = list(dict.fromkeys(owner[h] for h in hits))
        if len(owners) == 1:
            b = short(owners[0])
            said = f"is a run; its bench is {b}" if len(hits) == 1 else f"names {len(hits)} runs, all of bench {b}"
            return owners[0], f"notice: {given} {said}"
        if owners:
            pairs = [f"{short(h)} of {short(owner[h])}" for h in hits]
            listed = ", ".join(pairs[:SHOWN]) + (" …" if len(pairs) > SHOWN else "")
            raise ConfigError(
                f"{option}: {given!r} names no bench, and {len(hits)} runs of {len(owners)} benches ({listed}); "
                "give more of an id"
            )
    return resolve(given, benches, "bench", option, where), None
