"""Kubernetes' remedies, through the official client: `--on-fail taint` taints a failed node
`dltestbed.io/acceptance=failed:NoSchedule` (a taint's value holds 63 characters of [A-Za-z0-9._-], so the reason
goes in the node's annotation `dltestbed.io/acceptance-reason`); `--on-pass untaint` takes that taint and the
reason off a node that passed; `label` (either option) labels the node `dltestbed.io/acceptance=passed` or
`=failed`, with the reason as for a taint. Each change is one merge patch of the node made on the version of it
just read (its resourceVersion): a node whose taints changed meanwhile (the node controller's own) is read again,
and nobody's taint is lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dltestbed.errors import ConfigError
from dltestbed.remedy.base import ON_FAIL, ON_PASS, Where, reason
from dltestbed.transport.kubeapi import KUBECONFIG_VAR, REQUEST_SECONDS, client_for
from dltestbed.transport.podspec import reason_of

__all__ = ["KUBECONFIG_VAR"]  # where accept finds the kubeconfig the inventory names

KEY = "dltestbed.io/acceptance"  # the taint's and the label's key
REASON_KEY = "dltestbed.io/acceptance-reason"  # the annotation with a failed node's reason
FAILED, PASSED = "failed", "passed"
EFFECT = "NoSchedule"  # new pods stay off; what runs there is left to the site
REASON_MAX = 1000  # characters of the reason annotation (annotations hold far more; a line stays readable)
TRIES = 5  # reads and patches of a node that changes meanwhile


@dataclass(frozen=True)
class NodeMark:
    """Changes to one node's taint, label and reason annotation (None: left as it is)."""

    node: str
    kubeconfig: str | None
    who: str  # the option that asked for it, for its messages
    taint: bool | None = None  # True: our taint on; False: off
    label: str | None = None  # our label's value
    why: str | None = None  # the reason annotation; "": taken off

    @property
    def shown(self) -> str:
        done = []
        if self.taint is not None:
            done.append(f"taint {KEY}={FAILED}:{EFFECT}" if self.taint else f"take taint {KEY} off")
        if self.label is not None:
            done.append(f"label {KEY}={self.label}")
        if self.why:
            done.append(f"annotate {REASON_KEY}={self.why!r}")
        elif self.why == "":
            done.append(f"take annotation {REASON_KEY} off")
        return f"Kubernetes node {self.node}: {', '.join(done)}"

    def missing(self) -> str | None:
        try:
            client_for(self.kubeconfig, self.who)
        except ConfigError as exc:
            return str(exc)
        return None

    def patch(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        """The merge patch that makes these changes to `node` (the API's JSON of it), on its resourceVersion: the
        taints all given (a merge patch replaces a list), every other taint as it was; None when there is nothing
        to change. Pure."""
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        body: dict[str, Any] = {}
        if self.taint is not None:
            taints = list(spec.get("taints") or [])
            kept = [t for t in taints if t.get("key") != KEY]
            ours = [{"key": KEY, "value": FAILED, "effect": EFFECT}] if self.taint else []
            if kept + ours != taints:
                body["spec"] = {"taints": kept + ours}
        meta_changes: dict[str, Any] = {}
        if self.label is not None and (meta.get("labels") or {}).get(KEY) != self.label:
            meta_changes["labels"] = {KEY: self.label}
        annotations = meta.get("annotations") or {}
        if self.why and annotations.get(REASON_KEY) != self.why:
            meta_changes["annotations"] = {REASON_KEY: self.why}
        elif self.why == "" and REASON_KEY in annotations:
            meta_changes["annotations"] = {REASON_KEY: None}  # null: taken off
        if not body and not meta_changes:
            return None
        return {**body, "metadata": {"resourceVersion": meta.get("resourceVersion"), **meta_changes}}

    def run(self) -> tuple[int, str]:
        try:
            api = client_for(self.kubeconfig, self.who)
        except ConfigError as exc:
            return 1, str(exc)
        from kubernetes import client  # the `kubernetes` extra (client_for checked it is here)
        from kubernetes.client.rest import ApiException

        core = client.CoreV1Api(api)
        for _ in range(TRIES):
            try:
                body = self.patch(
                    api.sanitize_for_serialization(core.read_node(self.node, _request_timeout=REQUEST_SECONDS))
                )
                if body is None:
                    return 0, "already so"
                core.patch_node(
                    self.node, body, _content_type="application/merge-patch+json", _request_timeout=REQUEST_SECONDS
                )
                return 0, ""
            except ApiException as exc:
                if exc.status == 409:  # changed since it was read: read it again
                    continue
                if exc.status == 404:
                    return 1, f"no node {self.node} in the cluster"
                return 1, reason_of(exc)
            except Exception as exc:  # urllib3's: the cluster did not answer
                return 1, f"the cluster did not answer: {reason_of(exc)}"
        return 1, f"node {self.node} changed {TRIES} times while it was being changed; not done"


def unknown_nodes(nodes: tuple[str, ...], where: Where, who: str) -> str | None:
    """The accepted nodes the cluster does not have (a taint needs the node's name in the cluster), or that the
    cluster does not answer, in one line; None when it has them all."""
    from kubernetes import client  # the `kubernetes` extra

    try:
        api = client_for(where.kubeconfig, who)
        items: list[Any] = client.CoreV1Api(api).list_node(_request_timeout=REQUEST_SECONDS).items
        names = {str(n.metadata.name) for n in items}
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:
        return f"{who}: the cluster does not answer: {reason_of(exc)}"
    lacking = [n for n in nodes if n not in names]
    if lacking:
        return f"{who}: no node {', '.join(lacking)} in the cluster (its nodes: {', '.join(sorted(names)) or 'none'})"
    return None


def _why(failed: bool, why: str) -> str:
    return reason(why, REASON_MAX) if failed else ""


class OnCluster:
    """A built-in remedy that changes a node through the cluster's API: the cluster must hold every node."""

    name: ClassVar[str]

    def unknown(self, nodes: tuple[str, ...], where: Where, option: str) -> str | None:
        return unknown_nodes(nodes, where, f"{option} {self.name}")


@dataclass(frozen=True)
class Taint(OnCluster):
    """A failed node tainted, its reason annotated."""

    name: ClassVar[str] = "taint"
    options: ClassVar[tuple[str, ...]] = (ON_FAIL,)

    def action(self, node: str, failed: bool, why: str, where: Where) -> NodeMark:
        return NodeMark(node, where.kubeconfig, f"{ON_FAIL} {self.name}", taint=True, why=_why(failed, why))


@dataclass(frozen=True)
class Untaint(OnCluster):
    """A node that passed: dltestbed's taint and reason taken off (another's taints stay)."""

    name: ClassVar[str] = "untaint"
    options: ClassVar[tuple[str, ...]] = (ON_PASS,)

    def action(self, node: str, failed: bool, why: str, where: Where) -> NodeMark:
        return NodeMark(node, where.kubeconfig, f"{ON_PASS} {self.name}", taint=False, why="")


@dataclass(frozen=True)
class Label(OnCluster):
    """The node labelled with its verdict, a failed node's reason annotated (taken off one that passed)."""

    name: ClassVar[str] = "label"
    options: ClassVar[tuple[str, ...]] = (ON_FAIL, ON_PASS)

    def action(self, node: str, failed: bool, why: str, where: Where) -> NodeMark:
        who = f"{ON_FAIL if failed else ON_PASS} {self.name}"
        return NodeMark(node, where.kubeconfig, who, label=FAILED if failed else PASSED, why=_why(failed, why))
