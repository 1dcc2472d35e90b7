"""A Kubernetes API client from a kubeconfig, through the official client (the `kubernetes` extra), for whoever
talks to a cluster: the launcher's Jobs, acceptance's taints and labels; and a command run in a pod (exec)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError, TargetError
from dltestbed.transport.podspec import reason_of

REQUEST_SECONDS = 15.0  # any call to the API but a log's read: a stalled apiserver is not waited on for ever
KUBECONFIG_VAR = "dltestbed_kubeconfig"  # the inventory's kubeconfig (group all), where no --kubeconfig is given
DEFAULT_KUBECONFIG = "~/.kube/config"  # the client's own default, where neither --kubeconfig nor $KUBECONFIG is


def client_for(kubeconfig: str | None, who: str) -> Any:
    """An API client of the kubeconfig (`kubeconfig`, else $KUBECONFIG, else ~/.kube/config); one line, starting
    with `who` (the option that asked for the cluster), when the client is not installed, or there is no kubeconfig
    or it cannot be read."""
    try:
        from kubernetes import config  # the `kubernetes` extra: only what talks to a cluster needs it
    except ImportError:
        raise ConfigError(
            f"{who}: the Kubernetes client is not installed here (the `kubernetes` extra: "
            "pip install 'dltestbed[kubernetes]')"
        ) from None
    listed = os.environ.get("KUBECONFIG", "")  # may name several files, merged (os.pathsep between them)
    paths = [kubeconfig] if kubeconfig else [p for p in listed.split(os.pathsep) if p] or [DEFAULT_KUBECONFIG]
    shown = kubeconfig or listed or DEFAULT_KUBECONFIG
    if not any(Path(p).expanduser().is_file() for p in paths):
        raise ConfigError(f"{who}: no kubeconfig at {shown} (give --kubeconfig, or set KUBECONFIG)")
    try:
        return config.new_client_from_config(shown)  # a list of files merged, as kubectl merges them
    except Exception as exc:  # the client's own errors (a bad file, a missing context)
        raise ConfigError(f"{who}: kubeconfig {shown}: {exc}") from None


def exec_in(api: Any, namespace: str, pod: str, argv: Sequence[str]) -> None:
    """argv run in the pod's container through the API's exec; a TargetError unless it exits 0. Over a client of
    its own: the client's stream module swaps the request method of the client it is given while it runs, which
    would reach every other thread's call on that client."""
    from kubernetes import client  # the `kubernetes` extra: only a bench on a cluster imports it
    from kubernetes.stream import stream

    own = client.ApiClient(api.configuration)
    try:
        ws: Any = stream(
            client.CoreV1Api(own).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=list(argv),
            stdin=False,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        ws.run_forever(timeout=REQUEST_SECONDS)
        code, said = ws.returncode, ws.read_stderr().strip()
        ws.close()
    except Exception as exc:
        raise TargetError(f"could not run a command in pod {pod}: {reason_of(exc)}") from None
    finally:
        own.close()
    if code != 0:
        raise TargetError(f"a command in pod {pod} failed ({'did not end' if code is None else code}): {said}")
