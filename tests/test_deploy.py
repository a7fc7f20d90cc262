"""The Kubernetes manifests (deploy/kubernetes/): every overlay renders with ``kubectl kustomize``
and validates against the Kubernetes schemas (``kubernetes-validate``, strict), and the rendered
objects hold the security model docs/deploy.md describes. No cluster: what a cluster does with
them is not tested here (docs/deploy.md says what was)."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from exec_server.backends.docker import IPC_SYSCTLS, NET_SYSCTLS, SUPERVISOR_CAPS
from exec_server.settings import Settings

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.32.0"  # the kubectl of the machine image; the oldest schema we target
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def kubectl_problem() -> str | None:
    if not os.access(KUBECTL, os.X_OK):
        return "kubectl missing (the machine image ships kubectl 1.32)"
    out = subprocess.run([KUBECTL, "version", "--client"], capture_output=True, text=True)
    if "Kustomize Version: v5" not in out.stdout:
        return f"kubectl without kustomize v5: {out.stdout.strip()}"
    return None


@pytest.fixture(scope="module", autouse=True)
def kubectl() -> None:
    problem = kubectl_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the manifests cannot be rendered: {problem}")
        pytest.skip(problem)


@cache
def render(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The object of ``kind`` named ``name`` (a generated ConfigMap's name has a hash suffix)."""

    def named(obj: dict[str, Any]) -> bool:
        have = obj["metadata"]["name"]
        return have == name or (kind == "ConfigMap" and have.rpartition("-")[0] == name)

    found = [o for o in objects if o["kind"] == kind and named(o)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]


def pod_spec(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return find(objects, "Deployment", name)["spec"]["template"]["spec"]


def test_overlays_exist() -> None:
    assert {"gvisor", "runc"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(overlay: str) -> None:
    objects = render(overlay)
    kinds = {o["kind"] for o in objects}
    assert {
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    } <= kinds
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_hardened(overlay: str) -> None:
    objects = render(overlay)
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        assert spec["securityContext"]["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
        assert spec.get("terminationGracePeriodSeconds", 30) >= Settings().timeout_max
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]) <= set(resources["limits"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sandbox_pods_hold_nothing_of_the_cluster(overlay: str) -> None:
    objects = render(overlay)
    spec = pod_spec(objects, "boxed-sandbox")
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert spec["shareProcessNamespace"] is False
    (container,) = spec["containers"]
    assert container["securityContext"]["capabilities"]["add"] == SUPERVISOR_CAPS
    assert "livenessProbe" not in container and "readinessProbe" not in container
    assert all("secretKeyRef" not in str(e) for e in container.get("env", []))
    key = next(v for v in spec["volumes"] if v["name"] == "sandbox-key")
    assert key["secret"]["secretName"] == "boxed-sandbox-key"
    assert key["secret"]["defaultMode"] == 0o400  # root's only: not the snippet's uid
    assert "boxed-api-key" not in yaml.safe_dump(find(objects, "Deployment", "boxed-sandbox"))
    # The pod's limits are those the service assumes (BOXED_CPUS, memory maximum + overhead).
    config = find(objects, "ConfigMap", "boxed-config")["data"]
    limits = container["resources"]["limits"]
    assert limits["cpu"] == config["BOXED_CPUS"]
    memory = int(config["BOXED_MEMORY_MB_MAX"]) + int(config["BOXED_PROCESS_MEMORY_OVERHEAD_MB"])
    assert limits["memory"] == f"{memory}Mi" == container["resources"]["requests"]["memory"]
    assert f"--port={config['BOXED_POD_PORT']}" in container["command"]
    # /box (compiled programs) is an emptyDir, world-writable as made: the listener makes it
    # root's only, as the Docker backends' tmpfs mode=0755 does
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "/box" in mounts and "--private-dir=/box" in container["command"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_isolate_the_sandboxes(overlay: str) -> None:
    objects = render(overlay)
    policy = find(objects, "NetworkPolicy", "sandbox-isolation")
    assert policy["metadata"]["namespace"] == "boxed-sandbox"
    assert policy["spec"]["podSelector"] == {}  # every pod of the namespace
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["spec"]["egress"] == []  # no egress at all
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "boxed"}
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "boxed"}
    assert rule["ports"] == [{"protocol": "TCP", "port": 7000}]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_service_needs_only_pod_rights_in_the_sandbox_namespace(overlay: str) -> None:
    objects = render(overlay)
    assert [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")] == []
    role = find(objects, "Role", "boxed-sandbox-pods")
    assert role["metadata"]["namespace"] == "boxed-sandbox"
    (rule,) = role["rules"]
    assert rule["resources"] == ["pods"]
    assert set(rule["verbs"]) == {"get", "list", "watch", "delete", "patch"}
    spec = pod_spec(objects, "boxed")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert not any(v.get("hostPath") for v in spec["volumes"])  # no Docker socket
    (container,) = spec["containers"]
    assert {"readinessProbe", "livenessProbe", "startupProbe"} <= set(container)
    api_key = next(e for e in container["env"] if e["name"] == "BOXED_API_KEY")
    assert api_key["valueFrom"]["secretKeyRef"]["name"] == "boxed-api-key"


def test_tls_ends_at_the_ingress_and_reaches_the_service_port() -> None:
    """The ingress overlay adds only the Ingress: TLS with its certificate Secret, every path
    to the Service's named port, which the service's NetworkPolicy admits."""
    objects = render("gvisor-ingress-tls")
    ingress = find(objects, "Ingress", "boxed")
    (tls,) = ingress["spec"]["tls"]
    (rule,) = ingress["spec"]["rules"]
    assert tls["secretName"] == "boxed-tls" and rule["host"] in tls["hosts"]
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/" and path["backend"]["service"]["name"] == "boxed"
    port_name = path["backend"]["service"]["port"]["name"]
    service = find(objects, "Service", "boxed")
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == port_name]
    policy = find(objects, "NetworkPolicy", "service")
    admitted = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert port["port"] in admitted
    others = {(o["kind"], o["metadata"]["name"]) for o in render("gvisor")}
    added = {(o["kind"], o["metadata"]["name"]) for o in objects} - others
    assert added == {("Ingress", "boxed")}
    assert "Ingress" not in {o["kind"] for o in render("gvisor")}


def test_gvisor_overlay_uses_its_runtime_class() -> None:
    objects = render("gvisor")
    runtime_class = find(objects, "RuntimeClass", "gvisor")
    assert runtime_class["handler"] == "runsc"
    assert pod_spec(objects, "boxed-sandbox")["runtimeClassName"] == "gvisor"
    assert find(objects, "ConfigMap", "boxed-config")["data"]["BOXED_RUNTIME"] == "runsc"
    assert "runtimeClassName" not in pod_spec(render("runc"), "boxed-sandbox")


def test_sysctls_safe_by_default_and_all_with_the_component() -> None:
    safe = {
        "kernel.shm_rmid_forced",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
    base = pod_spec(render("runc"), "boxed-sandbox")["securityContext"]["sysctls"]
    assert {s["name"] for s in base} == safe
    everything = render("runc-all-sysctls")
    names = {
        s["name"]: s["value"]
        for s in pod_spec(everything, "boxed-sandbox")["securityContext"]["sysctls"]
    }
    assert {**IPC_SYSCTLS, **NET_SYSCTLS}.items() <= names.items()
    namespace = find(everything, "Namespace", "boxed-sandbox")["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "privileged"


def test_autoscalers_scale_the_pool_on_the_queue_with_cpu_as_fallback() -> None:
    objects = render("runc")
    pool = find(objects, "HorizontalPodAutoscaler", "boxed-sandbox")
    kinds = [m["type"] for m in pool["spec"]["metrics"]]
    assert kinds == ["External", "Resource"]
    assert pool["spec"]["metrics"][0]["external"]["metric"]["name"] == "boxed_queued"
    service = find(objects, "HorizontalPodAutoscaler", "boxed")
    assert service["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    rules = yaml.safe_load((DEPLOY / "prometheus-adapter-rules.yaml").read_text())
    assert rules["external"][0]["name"]["as"] == "boxed_queued"


def test_the_listener_in_the_manifests_is_the_guest_listener() -> None:
    """The ConfigMap ships a copy (Kustomize loads no file outside its tree): the same bytes."""
    copy = (DEPLOY / "base" / "listener.py").read_bytes()
    assert copy == (REPO / "exec_server" / "guest" / "listener.py").read_bytes()
    listener = find(render("runc"), "ConfigMap", "boxed-listener")
    assert listener["data"]["listener.py"] == copy.decode()


def test_ci_does_not_install_an_older_kubectl() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "kubernetes-client" not in ci  # Debian's, far older than the image's kubectl 1.32
