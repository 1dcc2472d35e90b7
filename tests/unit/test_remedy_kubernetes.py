"""Kubernetes' remedies (dltestbed/remedy/kubernetes.py): the merge patch each makes of a node as the API gives it
(our taint on or off, every other taint kept, the label, the reason annotation), nothing patched where nothing
changes, and a node changed meanwhile read again; against a local HTTP server that answers as an apiserver does
(the lab's real cluster: tests/lab/test_kubernetes.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dltestbed import remedy
from dltestbed.errors import ConfigError
from dltestbed.remedy.kubernetes import EFFECT, FAILED, KEY, REASON_KEY, REASON_MAX, NodeMark

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-11-30T05:00:00Z"}
TEAM = {"key": "team", "value": "ml", "effect": "NoSchedule"}
OURS = {"key": KEY, "value": FAILED, "effect": EFFECT}


Doc = dict[str, Any]  # an object as the API's JSON holds it


def node(
    taints: list[dict[str, str]], labels: dict[str, str] | None = None, notes: dict[str, str] | None = None
) -> Doc:
    meta = {"name": "n1", "resourceVersion": "42", "labels": labels or {}, "annotations": notes or {}}
    return {"metadata": meta, "spec": {"taints": taints}}


def mark(spec: str, failed: bool, why: str = "") -> NodeMark:
    act = remedy.action(spec, "n1", failed, why)
    assert isinstance(act, NodeMark)
    return act


def test_a_taint_keeps_every_other_taint_and_puts_the_reason_in_an_annotation() -> None:
    old = {"key": KEY, "value": FAILED, "effect": "NoExecute"}  # ours, from an acceptance asked otherwise
    body = mark("taint", True, "drift cuda: 12.8, where 7 of 8 nodes have 13.0").patch(node([NOT_READY, old, TEAM]))
    assert body == {
        "spec": {"taints": [NOT_READY, TEAM, OURS]},
        "metadata": {
            "resourceVersion": "42",  # made on the node as read: a change meanwhile is a conflict, not a loss
            "annotations": {REASON_KEY: "dltestbed: drift cuda: 12.8, where 7 of 8 nodes have 13.0"},
        },
    }
    again = mark("taint", True, "x").patch(node([TEAM, OURS], notes={REASON_KEY: "dltestbed: x"}))
    assert again is None  # already so: nothing sent


def test_untaint_takes_ours_off_alone_and_a_clean_node_is_left_alone() -> None:
    body = mark("untaint", False).patch(node([OURS, TEAM], notes={REASON_KEY: "dltestbed: old", "other": "kept"}))
    assert body == {
        "spec": {"taints": [TEAM]},
        "metadata": {"resourceVersion": "42", "annotations": {REASON_KEY: None}},
    }
    assert mark("untaint", False).patch(node([TEAM])) is None
    assert mark("untaint", False).patch({"metadata": {"name": "n1", "resourceVersion": "7"}, "spec": {}}) is None


def test_label_says_the_verdict_and_the_reason_of_a_failure() -> None:
    failed = mark("label", True, "slow").patch(node([TEAM], labels={"zone": "a"}))
    assert failed == {
        "metadata": {"resourceVersion": "42", "labels": {KEY: "failed"}, "annotations": {REASON_KEY: "dltestbed: slow"}}
    }
    passed = mark("label", False).patch(node([], labels={KEY: "failed"}, notes={REASON_KEY: "dltestbed: slow"}))
    assert passed == {
        "metadata": {"resourceVersion": "42", "labels": {KEY: "passed"}, "annotations": {REASON_KEY: None}}
    }


def test_the_reason_is_one_line_and_cut() -> None:
    long = mark("taint", True, "a\nb " + "x" * 5000)
    assert long.why is not None and len(long.why) == REASON_MAX and long.why.startswith("dltestbed: a b x")
    assert long.shown.startswith(f"Kubernetes node n1: taint {KEY}=failed:NoSchedule, annotate {REASON_KEY}='dltestbed")


class Api(BaseHTTPRequestHandler):
    """An apiserver's answers for one node: GET reads it, PATCH is refused once with 409 (changed meanwhile), as
    an apiserver answers a patch on an old resourceVersion, then taken."""

    node: ClassVar[Doc] = {}
    patches: ClassVar[list[tuple[str, Doc]]] = []
    conflicts: ClassVar[int] = 1

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/nodes/n1"):
            self._send(200, {"kind": "Node", "apiVersion": "v1", **type(self).node})
        else:
            self._send(404, {"kind": "Status", "code": 404, "message": 'nodes "n9" not found'})

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).patches.append((self.headers["Content-Type"], body))
        if type(self).conflicts:
            type(self).conflicts -= 1
            type(self).node = node([TEAM, NOT_READY]) | {"metadata": {"name": "n1", "resourceVersion": "43"}}
            self._send(
                409, {"kind": "Status", "code": 409, "reason": "Conflict", "message": "the object has been modified"}
            )
            return
        self._send(200, {"kind": "Node", "apiVersion": "v1", **type(self).node})


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Path]:
    Api.node, Api.patches, Api.conflicts = node([TEAM]), [], 1
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conf = tmp_path / "kubeconfig"
    conf.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{server.server_port}'}}}}]\n"
        "users: [{name: u, user: {token: not-a-secret}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    yield conf
    server.shutdown()


def test_a_node_changed_meanwhile_is_read_again_and_patched_on_its_new_version(api: Path) -> None:
    where = remedy.Where(str(api))
    act = remedy.action("taint", "n1", True, "slow", where)
    assert act.missing() is None
    assert act.run() == (0, "")
    (kind1, first), (kind2, second) = Api.patches
    assert kind1 == kind2 == "application/merge-patch+json"  # a list replaced whole, null takes a key off
    assert first["metadata"]["resourceVersion"] == "42" and first["spec"]["taints"] == [TEAM, OURS]
    # the node as it was after the conflict: the node controller's taint kept (its time as the client writes it)
    not_ready = {**NOT_READY, "timeAdded": "2026-11-30T05:00:00+00:00"}
    assert second["metadata"]["resourceVersion"] == "43" and second["spec"]["taints"] == [TEAM, not_ready, OURS]
    assert remedy.action("taint", "n9", True, "x", where).run() == (1, "no node n9 in the cluster")


def test_the_cluster_must_have_every_node_before_anything_is_measured(api: Path) -> None:
    # list_node: this server answers the list path with 404, as a cluster without the resource would
    with pytest.raises(ConfigError, match=r"^--on-fail taint: the cluster does not answer"):
        remedy.check_found("taint", "--on-fail", ("n1",), remedy.Where(str(api)))
    with pytest.raises(ConfigError, match=r"^--on-pass untaint: no kubeconfig at /nowhere/kc"):
        remedy.check_found("untaint", "--on-pass", ("n1",), remedy.Where("/nowhere/kc"))
