"""The report's noise floor: bare metal against itself in the same repetitions (the A/A arm, --aa), whose
interval must contain 0, with each kind's run-to-run variation and what these repetitions can detect."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.report.inference import CONFIDENCE, mde_pct, repetitions_needed
from dltestbed.report.keys import GroupKey
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.stats import GroupStats


def noise_floor(groups: Sequence[GroupStats]) -> list[str]:
    """The A/A table (--aa): bare metal against itself in the same repetitions, whose interval must
    contain 0; the run-to-run variation per kind; what these repetitions can detect."""
    rows = [g for g in groups if g.key.arm and g.effect is not None]
    if not rows:
        return []
    lines = [
        "",
        f"## Noise floor: A/A (bare metal twice per repetition), {CONFIDENCE:.0%} intervals",
        "",
        "| model | batch | size | n | A′ vs A % [interval] | contains 0 | run-to-run CV | smallest detectable "
        "at n (95 %, 80 % power) | n for 1 % | n for 2 % | n for 5 % |",
        "|" + "---|" * 11,
    ]
    for g in rows:
        e, k = g.effect, g.key
        assert e is not None and e.sd_log is not None
        same = [o for o in groups if same_workload(o.key, k)]
        cvs = ", ".join(f"{o.key.layer} {o.cv * 100:.2f} %" for o in same if o.cv is not None)
        need = [repetitions_needed(e.sd_log, pct) for pct in (1.0, 2.0, 5.0)]
        lines.append(
            md_row(
                [
                    k.model,
                    str(k.batch_size),
                    str(k.image_size),
                    str(e.n),
                    f"{e.overhead_pct:.2f} [{e.lo_pct:.2f}, {e.hi_pct:.2f}]",
                    "no" if e.excludes_zero else "yes",
                    cvs,
                    f"{mde_pct(e.sd_log, e.n):.2f} %",
                    *[str(x) if x else ">10000" for x in need],
                ]
            )
        )
    lines += [
        "",
        "A′ vs A: paired t on log ratios of two bare-metal runs in each repetition; an interval that "
        "excludes 0 means something besides the layer varies between runs. CV: sample std ÷ mean of images/sec "
        "over repetitions. Smallest detectable and n needed: from the A/A spread of log ratios, paired, "
        "95 % confidence, 80 % power.",
    ]
    return lines


def same_workload(a: GroupKey, b: GroupKey) -> bool:
    """Whether two groups ran the same model, sizes, scenario, mode, data and device (the noise floor's peers)."""
    return (a.model, a.batch_size, a.image_size, a.scenario, a.mode, a.data, a.device) == (
        b.model,
        b.batch_size,
        b.image_size,
        b.scenario,
        b.mode,
        b.data,
        b.device,
    )
