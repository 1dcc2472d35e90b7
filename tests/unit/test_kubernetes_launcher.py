"""The Kubernetes launcher's pure parts: its options checked, a run's Job as the cluster receives it, the pod's
command that marks stderr. The launcher on a real cluster: tests/lab/test_kubernetes.py."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from dltestbed.errors import ConfigError
from dltestbed.orchestrate.launchers import Kubernetes, launcher_for
from dltestbed.orchestrate.launchers.kubernetes import check_options, parse_labels
from dltestbed.requests.bench import BenchRequest, Container, Options, Where, Workloads
from dltestbed.requests.launch import KubernetesOptions, Launch
from dltestbed.transport.pod import STDERR, PodSpec, job_body, wrapped

K8S = BenchRequest(launch=Launch("kubernetes"))


def test_the_pods_command_marks_stderr_and_keeps_the_exit_status() -> None:
    argv = wrapped(["sh", "-c", "echo out1; echo 'err 1' >&2; echo out2; exit 3"], host_root=False)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and done.stderr == ""
    assert sorted(done.stdout.splitlines()) == sorted(["out1", "out2", f"{STDERR}err 1"])
    assert wrapped(["true"], host_root=True)[:3] == ["chroot", "/host", "bash"]


def test_bare_metals_job_runs_in_the_nodes_root_on_its_network() -> None:
    spec = PodSpec("ns", "n1", "img:1", host_network=True, host_root=True, labels={"team": "ops"})
    job = job_body("dltestbed-x-bm-n1-1", spec, ["/v/bin/python", "-m", "dltestbed.workload"], {"A": "b"})
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 0
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "n1"} and pod["hostNetwork"] is True
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert {"name": "host", "hostPath": {"path": "/", "type": "Directory"}} in pod["volumes"]
    assert container["command"][:2] == ["chroot", "/host"] and container["stdin"] is True
    assert container["env"] == [{"name": "A", "value": "b"}]
    labels = job["metadata"]["labels"]
    assert labels["team"] == "ops" and labels["app.kubernetes.io/managed-by"] == "dltestbed"
    assert container["resources"] == {"requests": {}, "limits": {}}


def test_a_containers_job_is_on_the_pod_network_with_its_folders_and_gpu() -> None:
    spec = PodSpec("ns", "n2", "img:1", mounts=("/data", "/cache"), requests={"nvidia.com/gpu": "1", "cpu": "2"})
    pod = job_body("j", spec, ["python"], {})["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is False and pod["containers"][0]["command"][0] == "bash"
    paths = [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]]
    assert paths == ["/data", "/cache"]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}  # an extended resource's limit


@pytest.mark.parametrize(
    ("kw", "line"),
    [
        ({"launch": Launch("kubernetes", nodes=0)}, "--nodes: at least 1"),
        ({"launch": Launch("kubernetes", venv="v")}, "--venv v: an absolute path"),
        ({"where": Where(targets=("bm", "vm"))}, "not vm"),
        ({"where": Where(limit="h1")}, "--limit picks inventory hosts"),
        ({"container": Container(runtime="docker")}, "cbm is a pod"),
        ({"workloads": Workloads(data="real")}, "give --data-shared"),
        ({"scenario": Options("shared"), "launch": Launch("kubernetes", nodes=2)}, "runs on one node"),
        ({"kubernetes": KubernetesOptions(labels=("nokey",))}, "--k8s-label: KEY=VALUE"),
    ],
)
def test_bad_combinations_are_one_line(kw: dict, line: str) -> None:
    with pytest.raises(ConfigError, match=line):
        check_options(replace(K8S, **kw))


def test_its_options_go_with_it_and_the_node_count() -> None:
    with pytest.raises(ConfigError, match=r"^--namespace goes with --launcher kubernetes$"):
        launcher_for(BenchRequest(kubernetes=KubernetesOptions(namespace="x")))
    chosen = launcher_for(replace(K8S, scenario=Options("distributed", workers=3)))
    assert isinstance(chosen, Kubernetes) and len(chosen.hosts()) == 3
    assert not Kubernetes.on_this_machine(K8S)
    assert parse_labels(("a=b", "c=")) == {"a": "b", "c": ""}
