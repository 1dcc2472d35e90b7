"""A Kubernetes API client from a kubeconfig, through the official client (the `kubernetes` extra), for whoever
talks to a cluster: the launcher's Jobs, acceptance's taints and labels; and a command run in a pod (exec)."""

from __future__ import annotations

import os
import threading
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


EXEC_SECONDS = 30.0  # a command run in a pod: the websocket's connect has no timeout of its own


def exec_in(api: Any, namespace: str, pod: str, argv: Sequence[str]) -> None:
    """argv run in the pod's container through the API's exec; a TargetError unless it exits 0 within
    EXEC_SECONDS. In a thread (the client's websocket connect would wait for ever on an API that does not answer)
    and over a client of its own (the client's stream module swaps a method of the client it is given while it
    runs, which other threads' calls on that client would meet)."""
    said: list[BaseException | None] = []

    def call() -> None:
        try:
            _exec(api, namespace, pod, argv)
            said.append(None)
        except BaseException as exc:
            said.append(exc)

    worker = threading.Thread(target=call, name="dltestbed-exec", daemon=True)
    worker.start()
    worker.join(EXEC_SECONDS)
    if not said:
        raise TargetError(f"a command in pod {pod} did not end within {EXEC_SECONDS:.0f} s (the API did not answer)")
    if said[0] is not None:
        raise said[0]


def _exec(api: Any, namespace: str, pod: str, argv: Sequence[str]) -> None:
    from kubernetes import client  # the `kubernetes` extra: only a bench on a cluster imports it
    from kubernetes.stream import stream

    own = client.ApiClient(api.configuration)
    ws: Any = None
    try:
        ws = stream(
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
        ws.run_forever(timeout=EXEC_SECONDS)
        err = ws.read_stderr().strip()
        try:
            code = ws.returncode
        except (ValueError, TypeError, KeyError):  # the error channel said no exit status: the exec itself failed
            code = -1
    except Exception as exc:
        raise TargetError(f"could not run a command in pod {pod}: {reason_of(exc)}") from None
    finally:
        if ws is not None:
            ws.close()
        own.close()
    if code != 0:
        raise TargetError(f"a command in pod {pod} failed ({'did not end' if code is None else code}): {err}")
