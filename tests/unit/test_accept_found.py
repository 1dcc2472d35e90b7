"""What the stages of an acceptance found, typed (accept/found.py): each type through the state file's JSON and
back unchanged, and a state file written before the types (lists for pairs, no `again`) read as it was meant."""

from __future__ import annotations

import json

from dltestbed.accept.found import (
    Batch,
    Beside,
    Facts,
    Found,
    Judged,
    Pair,
    Paired,
    Provisioned,
    Rejoined,
    Rerun,
    Rounds,
    decode,
    encode,
)


def test_every_finding_goes_through_json_and_back_unchanged() -> None:
    beside = Beside(("n1", "n2"), (Batch(("n4",), ("b-1", "b-2")),), together=False)
    every = [
        Found({"n6": "unreachable"}),
        Provisioned({"n6": "unreachable"}, "p-1"),
        Facts({}, {"n1": {"kernel": "6.1"}}, {"n1": 8}, "pytorch"),
        Paired(pairs=(Pair("n1", "n2", "b-3"),)),
        Judged(measures={"m": {"n1": 1.5}}, failed={"n3": "exit 1"}, rerun=("n3",), pairs=(("n1", "n2"),)),
        Rerun(
            **vars(beside),
            rerun=("n4",),
            measure=beside.benches,
            pairs=(Pair("n2", "n1", "b-4"), Pair("n3", None, None)),
        ),
        Rounds(rounds=(("b-5", "b-6"), ("b-7",))),
        Rejoined(**vars(beside), facts={"n6": {"kernel": "6.1"}}, rejoined=("n6",), measure=("b-8",), again=beside),
    ]
    for found in every:
        back = decode(type(found), json.loads(json.dumps(encode(found))))
        assert back == found and type(back) is type(found), (found, back)
    assert encode(Paired(pairs=(Pair("n1", "n2", "b-3"),))) == {"out": {}, "pairs": [["n1", "n2", "b-3"]]}  # as before


def test_a_state_file_of_the_version_before_reads_as_it_was_meant() -> None:
    """The second pass's data as dltestbed wrote it before the types: pairs as lists, "" for no partner."""
    old = {
        "rerun": ["n4"],
        "measure": ["b-1"],
        "pairs": [["n2", "n1", "b-9"], ["n3", "", ""]],
        "batches": [{"nodes": ["n4"], "benches": ["b-1"]}],
        "controls": ["n1", "n2"],
        "together": True,
    }
    second = decode(Rerun, old)
    assert second.pairs == (Pair("n2", "n1", "b-9"), Pair("n3", None, None))
    assert second.batches == (Batch(("n4",), ("b-1",)),) and second.controls == ("n1", "n2") and second.rerun == ("n4",)
    rejoin = decode(Rejoined, {"facts": {}, "gpus": {}, "out": {}, "rejoined": ["n6"], "measure": ["b-2"]})
    assert rejoin.again == Beside() and rejoin.rejoined == ("n6",)  # no `again`: nothing was measured again
    assert decode(Judged, {"pairs": [["n1", "n2"]], "unknown": 1}).pairs == (("n1", "n2"),)  # a key it does not know
