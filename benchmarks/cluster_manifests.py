"""Kubernetes manifests at cluster scale, for bench_manifests.py and the tests: what `kubectl get pods -A -o yaml`
prints for a cluster of N pods, and what `helm template` prints for a GPU-operator-like install of 200 objects.

Both are deterministic for a seed and need no cluster and no network.

The pod list is written as kubectl writes it (sigs.k8s.io/yaml, goyaml.v2's emitter, which is libyaml's, as
PyYAML's C emitter is): keys sorted, 2-space indent with sequences at their parent key's column, lines folded at
80 columns, strings plain where goyaml.v2 would read them back as strings and double-quoted where it would not
("true", "8080", ""), single-quoted where plain is not allowed, multi-line strings as literal blocks, no
managedFields (kubectl hides them unless --show-managed-fields). Items are ordered by namespace and name, as the
API server lists them.

The mix, in every run of 20 pods: one NVIDIA GPU operator DaemonSet pod (device plugin, DRA kubelet plugin,
container toolkit or validator, in turn), two GPU workloads (nvidia.com/gpu requested and limited; some
privileged, some with NVIDIA_VISIBLE_DEVICES, some with runtimeClassName nvidia) and 17 others: web and worker
pods with an istio sidecar, batch pods, pods with a log-shipping sidecar. That is GPU_SHARE of the pods, and about
POD_BYTES of text per pod, so 5,000 pods are about 60 MB.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import yaml

GPU_SHARE = 3 / 20
POD_BYTES = 12_000
GPU_OPERATOR_NAMESPACE = "gpu-operator"
HELM_OBJECTS = 200
# What helm_template writes, kind by kind: the test holds the stream to it.
HELM_KINDS = {
    "Namespace": 8,
    "ServiceAccount": 20,
    "ClusterRole": 16,
    "ClusterRoleBinding": 16,
    "Role": 16,
    "RoleBinding": 16,
    "ConfigMap": 30,
    "Service": 16,
    "Deployment": 12,
    "DaemonSet": 12,
    "RuntimeClass": 3,
    "DeviceClass": 4,
    "ResourceClaimTemplate": 8,
    "Job": 12,
    "CronJob": 11,
}

_BLOCK = 20
_GPU_SLOTS = (7, 13)  # slot 0 is the operator's pod
_OPERATOR_PODS = ("device-plugin", "dra-kubelet-plugin", "toolkit", "validator")
# The characters the API server draws generated name suffixes from (k8s.io/apimachinery's rand.String).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_EPOCH = datetime(2026, 11, 2, 6, 0, 0, tzinfo=timezone.utc)
_TEAMS = ("checkout", "catalog", "payments", "search", "accounts", "notifications", "reviews", "shipping")
_GPU_TEAMS = ("ml-training", "inference", "research")
_STR = "tag:yaml.org,2002:str"
# Where goyaml.v2 types plain scalars otherwise than PyYAML: it reads y and n as booleans, and "*", "&", "!" and
# "=" as strings (which then need single quotes, as any string that cannot be plain).
_GO_BOOLEANS = frozenset({"y", "Y", "n", "N"})
_GO_STRINGS = frozenset({_STR, "tag:yaml.org,2002:yaml", "tag:yaml.org,2002:value"})
_DRIVER = "570.172.08"
_OPERATOR_VERSION = "v25.3.4"


class _KubectlDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """goyaml.v2's choices where PyYAML's differ: a string that would not read back as a string is double-quoted
    (PyYAML single-quotes it) and a multi-line one is a literal block; no anchors, as Go's encoder writes none."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _kubectl_string(dumper: yaml.BaseDumper, value: str) -> yaml.ScalarNode:
    style: Optional[str] = None
    if "\n" in value:
        style = "|"
    elif value in _GO_BOOLEANS or dumper.resolve(yaml.ScalarNode, value, (True, False)) not in _GO_STRINGS:  # type: ignore[no-untyped-call]
        style = '"'
    return dumper.represent_scalar(_STR, value, style=style)


_KubectlDumper.add_representer(str, _kubectl_string)


class _HelmDumper(yaml.SafeDumper):
    """Chart templates as their authors write them: keys in the order written, sequences indented under their
    key, which goyaml.v2 and PyYAML's default do not do."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _literal_multiline(dumper: _HelmDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR, value, style="|" if "\n" in value else None)


_HelmDumper.add_representer(str, _literal_multiline)


# ---------------------------------------------------------------------------------------------------------------
# Small pieces


def _suffix(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_NAME_ALPHABET) for _ in range(length))


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _digest(rng: random.Random) -> str:
    return f"sha256:{rng.getrandbits(256):064x}"


def _container_id(rng: random.Random) -> str:
    return f"containerd://{rng.getrandbits(256):064x}"


def _time(offset_seconds: float) -> str:
    return (_EPOCH + timedelta(seconds=int(offset_seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _resource_field(name: str, resource: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"resourceFieldRef": {"divisor": "0", "resource": resource}}}


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _host_path(name: str, path: str, kind: str = "") -> dict[str, Any]:
    return {"hostPath": {"path": path, "type": kind}, "name": name}


def _mount(name: str, path: str, read_only: bool = False, propagation: str = "") -> dict[str, Any]:
    mount: dict[str, Any] = {"mountPath": path, "name": name}
    if read_only:
        mount["readOnly"] = True
    if propagation:
        mount["mountPropagation"] = propagation
    return mount


def _http_probe(path: str, port: Any, initial: int = 0, period: int = 10, failures: int = 3) -> dict[str, Any]:
    probe: dict[str, Any] = {
        "failureThreshold": failures,
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "periodSeconds": period,
        "successThreshold": 1,
        "timeoutSeconds": 1,
    }
    if initial:
        probe["initialDelaySeconds"] = initial
    return probe


def _api_access(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """The projected service-account volume the admission plugin adds to every pod, and its mount."""
    name = f"kube-api-access-{_suffix(rng, 5)}"
    volume = {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                {
                    "downwardAPI": {
                        "items": [
                            {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}
                        ]
                    }
                },
            ],
        },
    }
    return volume, _mount(name, "/var/run/secrets/kubernetes.io/serviceaccount", read_only=True)


def _container(
    name: str,
    image: str,
    *,
    env: Optional[list[dict[str, Any]]] = None,
    ports: Optional[list[tuple[str, int]]] = None,
    resources: Optional[dict[str, Any]] = None,
    mounts: Optional[list[dict[str, Any]]] = None,
    **extra: Any,
) -> dict[str, Any]:
    """A container with the defaults the API server fills in, as kubectl then prints them."""
    container: dict[str, Any] = {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "resources": resources or {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if env:
        container["env"] = env
    if ports:
        container["ports"] = [{"containerPort": port, "name": pname, "protocol": "TCP"} for pname, port in ports]
    if mounts:
        container["volumeMounts"] = mounts
    container.update(extra)
    return container


def _resources(cpu: str, memory: str, cpu_limit: Optional[str], memory_limit: str, gpus: int = 0) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {"memory": memory_limit}
    if cpu_limit:
        limits["cpu"] = cpu_limit
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        limits["nvidia.com/gpu"] = str(gpus)
    return {"limits": limits, "requests": requests}


# ---------------------------------------------------------------------------------------------------------------
# The istio sidecar, as istio's injector writes it

_ISTIO_VOLUMES = (
    "workload-socket",
    "credential-socket",
    "workload-certs",
    "istio-envoy",
    "istio-data",
    "istio-podinfo",
    "istio-token",
    "istiod-ca-cert",
)


def _istio_status() -> str:
    return json.dumps(
        {
            "initContainers": ["istio-init"],
            "containers": ["istio-proxy"],
            "volumes": list(_ISTIO_VOLUMES),
            "imagePullSecrets": None,
            "revision": "default",
        },
        separators=(",", ":"),
    )


def _istio_proxy(app: str, namespace: str, owner: str, ports: list[tuple[str, int]], api: dict[str, Any]) -> Any:
    # As istio's injection template writes it: one compact object a line, commas leading.
    entries = [json.dumps({"name": n, "containerPort": p, "protocol": "TCP"}, separators=(",", ":")) for n, p in ports]
    pod_ports = "[\n    " + "\n    ,".join(entries) + "\n]"
    env = [
        _env("PILOT_CERT_PROVIDER", "istiod"),
        _env("CA_ADDR", "istiod.istio-system.svc:15012"),
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field("INSTANCE_IP", "status.podIP"),
        _field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
        _field("HOST_IP", "status.hostIP"),
        _resource_field("ISTIO_CPU_LIMIT", "limits.cpu"),
        _env("PROXY_CONFIG", "{}\n"),
        _env("ISTIO_META_POD_PORTS", pod_ports),
        _env("ISTIO_META_APP_CONTAINERS", app),
        _resource_field("GOMEMLIMIT", "limits.memory"),
        _resource_field("GOMAXPROCS", "limits.cpu"),
        _env("ISTIO_META_CLUSTER_ID", "Kubernetes"),
        _field("ISTIO_META_NODE_NAME", "spec.nodeName"),
        _env("ISTIO_META_INTERCEPTION_MODE", "REDIRECT"),
        _env("ISTIO_META_WORKLOAD_NAME", app),
        _env("ISTIO_META_OWNER", f"kubernetes://apis/apps/v1/namespaces/{namespace}/{owner}"),
        _env("ISTIO_META_MESH_ID", "cluster.local"),
        _env("TRUST_DOMAIN", "cluster.local"),
    ]
    mounts = [
        _mount("workload-socket", "/var/run/secrets/workload-spiffe-uds"),
        _mount("credential-socket", "/var/run/secrets/credential-uds"),
        _mount("workload-certs", "/var/run/secrets/workload-spiffe-credentials"),
        _mount("istiod-ca-cert", "/var/run/secrets/istio"),
        _mount("istio-data", "/var/lib/istio/data"),
        _mount("istio-envoy", "/etc/istio/proxy"),
        _mount("istio-token", "/var/run/secrets/tokens"),
        _mount("istio-podinfo", "/etc/istio/pod"),
        api,
    ]
    return _container(
        "istio-proxy",
        "docker.io/istio/proxyv2:1.27.3",
        env=env,
        ports=[("http-envoy-prom", 15090)],
        resources=_resources("100m", "128Mi", "2", "1Gi"),
        mounts=mounts,
        args=[
            "proxy",
            "sidecar",
            "--domain",
            "$(POD_NAMESPACE).svc.cluster.local",
            "--proxyLogLevel=warning",
            "--proxyComponentLogLevel=misc:error",
            "--log_output_level=default:info",
        ],
        readinessProbe=_http_probe("/healthz/ready", 15021, period=15, failures=4),
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
    )


def _istio_init(api: dict[str, Any]) -> dict[str, Any]:
    return _container(
        "istio-init",
        "docker.io/istio/proxyv2:1.27.3",
        resources=_resources("100m", "128Mi", "2", "1Gi"),
        mounts=[api],
        args=[
            "istio-iptables",
            "-p",
            "15001",
            "-z",
            "15006",
            "-u",
            "1337",
            "-m",
            "REDIRECT",
            "-i",
            "*",
            "-x",
            "",
            "-b",
            "*",
            "-d",
            "15090,15021,15020",
            "--log_output_level=default:info",
        ],
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": False,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "runAsUser": 0,
        },
    )


def _istio_pod_volumes() -> list[dict[str, Any]]:
    return [
        {"emptyDir": {}, "name": "workload-socket"},
        {"emptyDir": {}, "name": "credential-socket"},
        {"emptyDir": {}, "name": "workload-certs"},
        {"emptyDir": {"medium": "Memory"}, "name": "istio-envoy"},
        {"emptyDir": {}, "name": "istio-data"},
        {
            "downwardAPI": {
                "defaultMode": 420,
                "items": [
                    {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}, "path": "labels"},
                    {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"}, "path": "annotations"},
                ],
            },
            "name": "istio-podinfo",
        },
        {
            "name": "istio-token",
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"audience": "istio-ca", "expirationSeconds": 43200, "path": "istio-token"}}
                ],
            },
        },
        {"configMap": {"defaultMode": 420, "name": "istio-ca-root-cert"}, "name": "istiod-ca-cert"},
    ]


# ---------------------------------------------------------------------------------------------------------------
# Pods


def _app_env(rng: random.Random, team: str, app: str, count: int) -> list[dict[str, Any]]:
    """The environment of a service that reads its configuration from it, as most do."""
    base = [
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field("POD_IP", "status.podIP"),
        _field("NODE_NAME", "spec.nodeName"),
        _env("LOG_LEVEL", rng.choice(["info", "warn", "debug"])),
        _env("LOG_FORMAT", "json"),
        _env("PORT", "8080"),
        _env("METRICS_PORT", "9090"),
        _env("OTEL_SERVICE_NAME", app),
        _env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability.svc.cluster.local:4317"),
        _env("OTEL_RESOURCE_ATTRIBUTES", f"service.namespace={team},deployment.environment=production"),
        _env("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        _env("OTEL_TRACES_SAMPLER_ARG", "0.05"),
        _env("DATABASE_HOST", f"{team}-postgres-rw.{team}.svc.cluster.local"),
        _env("DATABASE_PORT", "5432"),
        _env("DATABASE_NAME", team.replace("-", "_")),
        {"name": "DATABASE_USER", "valueFrom": {"secretKeyRef": {"key": "username", "name": f"{team}-postgres-app"}}},
        {
            "name": "DATABASE_PASSWORD",
            "valueFrom": {"secretKeyRef": {"key": "password", "name": f"{team}-postgres-app"}},
        },
        _env("REDIS_URL", f"redis://{team}-redis-master.{team}.svc.cluster.local:6379/0"),
        _env("KAFKA_BROKERS", "kafka-0.kafka-headless.kafka:9092,kafka-1.kafka-headless.kafka:9092"),
        {"name": "FEATURE_FLAGS", "valueFrom": {"configMapKeyRef": {"key": "flags", "name": f"{app}-features"}}},
        _env("ENABLE_PROFILING", rng.choice(["true", "false"])),
        _env("GOGC", "100"),
        _env("HTTP_READ_TIMEOUT", "30s"),
        _env("HTTP_WRITE_TIMEOUT", "30s"),
        _env("SHUTDOWN_GRACE_PERIOD", "25s"),
        _env("SENTRY_DSN", f"https://{rng.getrandbits(128):032x}@sentry.internal.example.com/{rng.randint(2, 90)}"),
    ]
    extra = [_env(f"{app.upper().replace('-', '_')}_OPTION_{n}", f"value {rng.randint(0, 999)}") for n in range(count)]
    return base + extra


def _log_shipper(api: dict[str, Any]) -> dict[str, Any]:
    return _container(
        "fluent-bit",
        "cr.fluentbit.io/fluent/fluent-bit:4.0.7",
        env=[_field("NODE_NAME", "spec.nodeName"), _env("FLUENT_ELASTICSEARCH_HOST", "logs.observability")],
        resources=_resources("50m", "64Mi", None, "128Mi"),
        mounts=[
            _mount("app-logs", "/var/log/app", read_only=True),
            _mount("fluent-bit-config", "/fluent-bit/etc/"),
            api,
        ],
    )


def _conditions(started: float, ready: bool = True) -> list[dict[str, Any]]:
    status = "True" if ready else "False"
    rows = [
        ("PodReadyToStartContainers", 4, "True"),
        ("Initialized", 6, "True"),
        ("Ready", 21, status),
        ("ContainersReady", 21, status),
        ("PodScheduled", 0, "True"),
    ]
    conditions = []
    for kind, after, value in rows:
        condition: dict[str, Any] = {"lastProbeTime": None, "lastTransitionTime": _time(started + after)}
        if value == "False":
            condition["reason"] = "PodCompleted"
        condition.update({"status": value, "type": kind})
        conditions.append(condition)
    return conditions


def _status_of(
    rng: random.Random, container: dict[str, Any], started: float, terminated: bool = False
) -> dict[str, Any]:
    image = container["image"]
    state: dict[str, Any]
    if terminated:
        state = {
            "terminated": {
                "containerID": "",
                "exitCode": 0,
                "finishedAt": _time(started + rng.randint(30, 900)),
                "reason": "Completed",
                "startedAt": _time(started + 5),
            }
        }
    else:
        state = {"running": {"startedAt": _time(started + rng.randint(5, 20))}}
    status: dict[str, Any] = {
        "containerID": _container_id(rng),
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@{_digest(rng)}",
        "lastState": {},
        "name": container["name"],
        "ready": not terminated,
        "restartCount": rng.choice([0, 0, 0, 0, 1, 2]),
        "started": not terminated,
        "state": state,
    }
    if terminated:
        state["terminated"]["containerID"] = status["containerID"]
    if container.get("volumeMounts"):
        status["volumeMounts"] = [
            {**mount, "recursiveReadOnly": "Disabled"} if mount.get("readOnly") else dict(mount)
            for mount in container["volumeMounts"]
        ]
    resources = container.get("resources")
    if resources:
        status["allocatedResources"] = dict(resources.get("requests", {}))
        status["resources"] = resources
    status["user"] = {"linux": {"gid": 1000, "supplementalGroups": [1000], "uid": 1000}}
    return status


def _pod(
    rng: random.Random,
    *,
    index: int,
    namespace: str,
    generate_name: str,
    owner: tuple[str, str, str],
    labels: dict[str, str],
    annotations: dict[str, str],
    spec: dict[str, Any],
    node: str,
    terminated: bool = False,
    ordinal: Optional[int] = None,
) -> dict[str, Any]:
    """A scheduled, running (or completed) pod as the API server returns it, status and all. A StatefulSet's pod
    (ordinal given) is named by its ordinal instead of a generated suffix."""
    api_version, kind, owner_name = owner
    started = index * 37 + rng.randint(0, 3600)
    spec = {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeName": node,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Never" if kind == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
        ],
        **spec,
    }
    spec["serviceAccount"] = spec["serviceAccountName"]
    ip = f"10.{64 + index % 60}.{(index // 60) % 250}.{2 + index % 250}"
    host_ip = f"10.0.{(index // 30) % 250}.{10 + (index // 30) % 200}"
    status: dict[str, Any] = {
        "conditions": _conditions(started, ready=not terminated),
        "containerStatuses": [_status_of(rng, c, started, terminated) for c in spec["containers"]],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "phase": "Succeeded" if terminated else "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "qosClass": "Burstable",
        "startTime": _time(started),
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [_status_of(rng, c, started, True) for c in spec["initContainers"]]
    metadata: dict[str, Any] = {"annotations": annotations, "creationTimestamp": _time(started)}
    if ordinal is None:
        metadata.update({"generateName": generate_name, "labels": labels, "name": generate_name + _suffix(rng, 5)})
    else:
        name = f"{generate_name}{ordinal}"
        labels.update({"apps.kubernetes.io/pod-index": str(ordinal), "statefulset.kubernetes.io/pod-name": name})
        metadata.update({"labels": labels, "name": name})
    metadata.update(
        {
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": api_version,
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": kind,
                    "name": owner_name,
                    "uid": _uid(rng),
                }
            ],
            "resourceVersion": str(10_000_000 + index * 131 + rng.randint(0, 130)),
            "uid": _uid(rng),
        }
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _node(index: int, gpu: bool) -> str:
    # 30 pods a node; GPU pods on the GPU nodes, one of which every run of 20 pods adds.
    if gpu:
        return f"gpu-a100-{index // _BLOCK:04d}.cluster.internal"
    return f"ip-10-0-{(index // 30) % 250}-{10 + (index // 30) % 200}.cluster.internal"


def _service_pod(rng: random.Random, index: int, meshed: bool) -> dict[str, Any]:
    """A web or worker pod of a Deployment or StatefulSet, its istio sidecar injected where meshed, some with a
    log-shipping sidecar."""
    team = rng.choice(_TEAMS)
    role = rng.choice(["api", "web", "worker", "gateway", "consumer"])
    app = f"{team}-{role}"
    stateful = role == "consumer"
    template_hash = _suffix(rng, 10)
    api_volume, api = _api_access(rng)
    ports = [("http", 8080), ("metrics", 9090)]
    if stateful:
        owner = ("apps/v1", "StatefulSet", app)
        generate_name = f"{app}-"
        owner_path = f"statefulsets/{app}"
    else:
        owner = ("apps/v1", "ReplicaSet", f"{app}-{template_hash}")
        generate_name = f"{app}-{template_hash}-"
        owner_path = f"deployments/{app}"
    # istio rewrites the app's HTTP probes to go through its agent on 15020.
    probe_port, probe_path = (15020, "/app-health/app/") if meshed else ("http", "/")
    main = _container(
        "app",
        f"ghcr.io/example-shop/{app}:v{rng.randint(1, 4)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
        env=_app_env(rng, team, app, rng.randint(0, 6)),
        ports=ports,
        resources=_resources(f"{rng.choice([100, 250, 500])}m", "256Mi", None, "512Mi"),
        mounts=[_mount("config", "/etc/app"), _mount("tmp", "/tmp"), api],
        livenessProbe=_http_probe(f"{probe_path}livez", probe_port, initial=10),
        readinessProbe=_http_probe(f"{probe_path}readyz", probe_port, initial=5),
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
        },
    )
    containers = [main]
    volumes = [
        {"configMap": {"defaultMode": 420, "name": f"{app}-config"}, "name": "config"},
        {"emptyDir": {}, "name": "tmp"},
        api_volume,
    ]
    labels = {"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": team, "version": "v1"}
    annotations = {
        "kubectl.kubernetes.io/default-container": "app",
        "kubectl.kubernetes.io/restartedAt": _time(-86400 * rng.randint(1, 30)),
        "prometheus.io/path": "/metrics",
        "prometheus.io/port": "9090",
        "prometheus.io/scrape": "true",
    }
    spec: dict[str, Any] = {}
    if meshed:
        containers.append(_istio_proxy("app", team, owner_path, ports, api))
        volumes = _istio_pod_volumes() + volumes
        spec["initContainers"] = [_istio_init(api)]
        labels["security.istio.io/tlsMode"] = "istio"
        labels["service.istio.io/canonical-name"] = app
        labels["service.istio.io/canonical-revision"] = "latest"
        annotations.update(
            {
                "istio.io/rev": "default",
                "kubectl.kubernetes.io/default-logs-container": "app",
                "prometheus.io/path": "/stats/prometheus",
                "prometheus.io/port": "15020",
                "sidecar.istio.io/status": _istio_status(),
            }
        )
    if rng.random() < (0.2 if meshed else 0.5):
        containers.append(_log_shipper(api))
        volumes.append({"emptyDir": {}, "name": "app-logs"})
        volumes.append({"configMap": {"defaultMode": 420, "name": "fluent-bit-config"}, "name": "fluent-bit-config"})
    if stateful:
        labels["controller-revision-hash"] = f"{app}-{template_hash}"
    else:
        labels["pod-template-hash"] = template_hash
    spec.update(
        {
            "containers": containers,
            "serviceAccountName": app,
            "topologySpreadConstraints": [
                {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                }
            ],
            "volumes": volumes,
        }
    )
    return _pod(
        rng,
        index=index,
        namespace=team,
        generate_name=generate_name,
        owner=owner,
        labels=labels,
        annotations=annotations,
        spec=spec,
        node=_node(index, False),
        ordinal=index if stateful else None,
    )


def _batch_pod(rng: random.Random, index: int) -> dict[str, Any]:
    """A completed pod of a CronJob's Job: no sidecar, as jobs opt out of the mesh."""
    team = rng.choice(_TEAMS)
    task = rng.choice(["report", "reindex", "sync", "backup", "cleanup"])
    job = f"{team}-{task}-{29_000_000 + rng.randint(0, 99_999)}"
    api_volume, api = _api_access(rng)
    controller_uid = _uid(rng)
    main = _container(
        task,
        f"ghcr.io/example-shop/{team}-jobs:v{rng.randint(1, 3)}.{rng.randint(0, 30)}.0",
        env=_app_env(rng, team, f"{team}-{task}", rng.randint(4, 10)),
        resources=_resources("500m", "512Mi", None, "1Gi"),
        mounts=[_mount("scratch", "/scratch"), api],
        command=["/bin/sh", "-c"],
        args=[f"exec /app/bin/{task} --since=24h --batch-size=500 --concurrency=4 --report-to=s3://reports/{team}"],
    )
    labels = {
        "batch.kubernetes.io/controller-uid": controller_uid,
        "batch.kubernetes.io/job-name": job,
        "controller-uid": controller_uid,
        "job-name": job,
    }
    annotations = {"batch.kubernetes.io/job-tracking": "", "sidecar.istio.io/inject": "false"}
    spec = {
        "containers": [main],
        "serviceAccountName": f"{team}-jobs",
        "volumes": [{"emptyDir": {"sizeLimit": "2Gi"}, "name": "scratch"}, api_volume],
    }
    return _pod(
        rng,
        index=index,
        namespace=team,
        generate_name=f"{job}-",
        owner=("batch/v1", "Job", job),
        labels=labels,
        annotations=annotations,
        spec=spec,
        node=_node(index, False),
        terminated=True,
    )


def _gpu_workload(rng: random.Random, index: int) -> dict[str, Any]:
    """A pod that asks for GPUs: training jobs, inference servers, notebooks, each with its own habits."""
    team = rng.choice(_GPU_TEAMS)
    kind = rng.choice(["training", "inference", "notebook"])
    gpus = {"training": rng.choice([4, 8]), "inference": 1, "notebook": rng.choice([1, 2])}[kind]
    api_volume, api = _api_access(rng)
    env = [
        _field("POD_NAME", "metadata.name"),
        _env("NCCL_DEBUG", "WARN"),
        _env("NCCL_SOCKET_IFNAME", "eth0"),
        _env("NCCL_IB_DISABLE", "1"),
        _env("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        _env("HF_HOME", "/cache/huggingface"),
        _env("TRANSFORMERS_OFFLINE", "1"),
        _env("OMP_NUM_THREADS", "8"),
        _env("WANDB_MODE", "offline"),
        _env("MODEL_NAME", rng.choice(["llama-3.1-8b", "mistral-7b", "resnet50", "bert-large"])),
    ]
    env += [_env(f"TRAIN_OPTION_{n}", f"{rng.random():.4f}") for n in range(rng.randint(6, 12))]
    # What the issue's rules look for, in the shares a real cluster has them.
    if rng.random() < 0.3:
        env.append(_env("NVIDIA_VISIBLE_DEVICES", rng.choice(["all", "0,1", "void"])))
    if rng.random() < 0.3:
        env.append(_env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"))
    security: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if rng.random() < 0.2:
        security = {"privileged": True}
    image = {
        "training": "nvcr.io/nvidia/pytorch:25.08-py3",
        "inference": "nvcr.io/nvidia/tritonserver:25.08-py3",
        "notebook": "nvcr.io/nvidia/cuda:12.9.1-cudnn-runtime-ubuntu24.04",
    }[kind]
    main = _container(
        kind,
        image,
        env=env,
        ports=[("http", 8000), ("metrics", 8002)] if kind == "inference" else None,
        resources=_resources("8", "64Gi", None, "96Gi", gpus=gpus),
        mounts=[_mount("dshm", "/dev/shm"), _mount("cache", "/cache"), _mount("data", "/data", read_only=True), api],
        command=["python", "-m", f"{team.replace('-', '_')}.{kind}"],
        args=["--config", f"/etc/{kind}/config.yaml", "--checkpoint-dir", "/cache/checkpoints"],
        securityContext=security,
    )
    volumes = [
        {"emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}, "name": "dshm"},
        {"name": "cache", "persistentVolumeClaim": {"claimName": f"{team}-cache"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": f"{team}-datasets", "readOnly": True}},
        api_volume,
    ]
    spec: dict[str, Any] = {
        "containers": [main],
        "nodeSelector": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "serviceAccountName": f"{team}-runner",
        "volumes": volumes,
    }
    if rng.random() < 0.5:
        spec["runtimeClassName"] = "nvidia"
    name_hash = _suffix(rng, 10)
    owner, generate_name, labels = {
        "training": (
            ("batch/v1", "Job", f"{team}-train-{name_hash[:6]}"),
            f"{team}-train-{name_hash[:6]}-",
            {
                "job-name": f"{team}-train-{name_hash[:6]}",
                "batch.kubernetes.io/job-name": f"{team}-train-{name_hash[:6]}",
            },
        ),
        "inference": (
            ("apps/v1", "ReplicaSet", f"{team}-triton-{name_hash}"),
            f"{team}-triton-{name_hash}-",
            {"app": f"{team}-triton", "pod-template-hash": name_hash},
        ),
        "notebook": (
            ("apps/v1", "StatefulSet", f"{team}-notebook-{name_hash[:4]}"),
            f"{team}-notebook-{name_hash[:4]}-",
            {"app": "notebook", "notebook-name": f"{team}-notebook-{name_hash[:4]}"},
        ),
    }[kind]
    labels = {**labels, "app.kubernetes.io/part-of": team, "nvidia.com/workload": kind}
    annotations = {"kubectl.kubernetes.io/default-container": kind, "sidecar.istio.io/inject": "false"}
    pod = _pod(
        rng,
        index=index,
        namespace=team,
        generate_name=generate_name,
        owner=owner,
        labels=labels,
        annotations=annotations,
        spec=spec,
        node=_node(index, True),
        ordinal=0 if kind == "notebook" else None,
    )
    pod["spec"]["tolerations"].insert(0, {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"})
    return pod


def _operator_pod(rng: random.Random, index: int) -> dict[str, Any]:
    """A pod of one of the GPU operator's DaemonSets on a GPU node: privileged, host paths, the toolkit's env."""
    component = _OPERATOR_PODS[(index // _BLOCK) % len(_OPERATOR_PODS)]
    api_volume, api = _api_access(rng)
    revision = _suffix(rng, 9)
    init: list[dict[str, Any]] = []
    spec: dict[str, Any] = {"priorityClassName": "system-node-critical"}
    if component == "device-plugin":
        name = "nvidia-device-plugin-daemonset"
        main = _container(
            "nvidia-device-plugin",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.4",
            env=[
                _env("PASS_DEVICE_SPECS", "true"),
                _env("FAIL_ON_INIT_ERROR", "true"),
                _env("DEVICE_LIST_STRATEGY", "envvar"),
                _env("DEVICE_ID_STRATEGY", "uuid"),
                _env("NVIDIA_VISIBLE_DEVICES", "all"),
                _env("NVIDIA_DRIVER_CAPABILITIES", "all"),
                _env("MPS_ROOT", "/run/nvidia/mps"),
                _env("MIG_STRATEGY", "single"),
                _env("NVIDIA_MIG_MONITOR_DEVICES", "all"),
            ],
            mounts=[
                _mount("device-plugin", "/var/lib/kubelet/device-plugins"),
                _mount("run-nvidia-validations", "/run/nvidia/validations"),
                _mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                _mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                _mount("cdi-root", "/var/run/cdi"),
                api,
            ],
            command=["nvidia-device-plugin"],
            securityContext={"privileged": True},
        )
        volumes = [
            _host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            _host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
        ]
        spec["runtimeClassName"] = "nvidia"
    elif component == "dra-kubelet-plugin":
        name = "nvidia-dra-driver-gpu-kubelet-plugin"
        main = _container(
            "gpus",
            "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0",
            env=[
                _env("MASK_NVIDIA_DRIVER_PARAMS", "true"),
                _env("NVIDIA_CTK_PATH", "/usr/local/nvidia/toolkit/nvidia-ctk"),
                _env("NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"),
                _env("NVIDIA_VISIBLE_DEVICES", "void"),
                _env("CDI_ROOT", "/var/run/cdi"),
                _env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
                _field("NODE_NAME", "spec.nodeName"),
                _field("NAMESPACE", "metadata.namespace"),
            ],
            mounts=[
                _mount("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                _mount("plugins", "/var/lib/kubelet/plugins", propagation="Bidirectional"),
                _mount("cdi", "/var/run/cdi"),
                _mount("host-dev", "/dev"),
                _mount("driver-root", "/driver-root", read_only=True, propagation="HostToContainer"),
                api,
            ],
            command=["bash", "-c"],
            args=["exec gpu-kubelet-plugin --v=4"],
            securityContext={"privileged": True},
        )
        volumes = [
            _host_path("plugins-registry", "/var/lib/kubelet/plugins_registry"),
            _host_path("plugins", "/var/lib/kubelet/plugins"),
            _host_path("cdi", "/var/run/cdi"),
            _host_path("host-dev", "/dev"),
            _host_path("driver-root", "/run/nvidia/driver"),
        ]
    elif component == "toolkit":
        name = "nvidia-container-toolkit-daemonset"
        main = _container(
            "nvidia-container-toolkit-ctr",
            "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04",
            env=[
                _env("ROOT", "/usr/local/nvidia"),
                _env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
                _env("NVIDIA_VISIBLE_DEVICES", "void"),
                _env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
                _env("CDI_ENABLED", "true"),
                _env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES", "nvidia.cdi.k8s.io/"),
                _env("CRIO_CONFIG_MODE", "config"),
                _env("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
                _env("RUNTIME", "containerd"),
                _env("CONTAINERD_RUNTIME_CLASS", "nvidia"),
                _env("RUNTIME_CONFIG", "/runtime/config-dir/config.toml"),
                _env("CONTAINERD_CONFIG", "/runtime/config-dir/config.toml"),
                _env("RUNTIME_SOCKET", "/runtime/sock-dir/containerd.sock"),
                _env("CONTAINERD_SOCKET", "/runtime/sock-dir/containerd.sock"),
            ],
            mounts=[
                _mount("run-nvidia-toolkit", "/run/nvidia/toolkit"),
                _mount("run-nvidia-validations", "/run/nvidia/validations", propagation="HostToContainer"),
                _mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                _mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                _mount("toolkit-install-dir", "/usr/local/nvidia"),
                _mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
                _mount("containerd-config", "/runtime/config-dir/"),
                _mount("containerd-socket", "/runtime/sock-dir/"),
                _mount("cdi-root", "/var/run/cdi"),
                api,
            ],
            command=["/bin/bash", "-c"],
            args=["/bin/entrypoint.sh"],
            securityContext={"privileged": True},
        )
        volumes = [
            _host_path("run-nvidia-toolkit", "/run/nvidia/toolkit"),
            _host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            _host_path("toolkit-install-dir", "/usr/local/nvidia"),
            _host_path("crio-hooks", "/run/containers/oci/hooks.d"),
            _host_path("containerd-config", "/etc/containerd", "DirectoryOrCreate"),
            _host_path("containerd-socket", "/run/containerd"),
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
        ]
        spec["hostPID"] = True
    else:
        name = "nvidia-operator-validator"
        validator = f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{_OPERATOR_VERSION}"
        for step, extra in (
            ("driver", [_env("DRIVER_INSTALL_DIR", "/run/nvidia/driver")]),
            ("toolkit", [_env("NVIDIA_VISIBLE_DEVICES", "all")]),
            ("cuda", [_env("WITH_WORKLOAD", "false"), _field("NODE_NAME", "spec.nodeName")]),
            ("plugin", [_env("WITH_WORKLOAD", "false"), _env("MIG_STRATEGY", "single")]),
        ):
            init.append(
                _container(
                    f"{step}-validation",
                    validator,
                    env=[_env("WITH_WAIT", "true"), _env("COMPONENT", step), *extra],
                    mounts=[
                        _mount("run-nvidia-validations", "/run/nvidia/validations", propagation="Bidirectional"),
                        _mount("driver-install-dir", "/run/nvidia/driver", propagation="HostToContainer"),
                        _mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                        api,
                    ],
                    command=["sh", "-c"],
                    args=["nvidia-validator"],
                    securityContext={"privileged": True, "seLinuxOptions": {"level": "s0"}},
                )
            )
        main = _container(
            "nvidia-operator-validator",
            validator,
            mounts=[_mount("run-nvidia-validations", "/run/nvidia/validations", propagation="Bidirectional"), api],
            command=["sh", "-c"],
            args=["echo all validations are successful; sleep infinity"],
            securityContext={"privileged": True},
            lifecycle={"preStop": {"exec": {"command": ["sh", "-c", "rm -f /run/nvidia/validations/*-ready"]}}},
        )
        volumes = [
            _host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver"),
            _host_path("host-root", "/"),
        ]
        spec["runtimeClassName"] = "nvidia"
    spec.update(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [_node(index, True)]}
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [main],
            "nodeSelector": {f"nvidia.com/gpu.deploy.{component.split('-')[0]}": "true"},
            "serviceAccountName": name.replace("-daemonset", ""),
            "volumes": [*volumes, api_volume],
        }
    )
    if init:
        spec["initContainers"] = init
    labels = {
        "app": name,
        "app.kubernetes.io/managed-by": "gpu-operator",
        "app.kubernetes.io/part-of": "nvidia-gpu",
        "controller-revision-hash": revision,
        "helm.sh/chart": f"gpu-operator-{_OPERATOR_VERSION}",
        "pod-template-generation": "3",
    }
    pod = _pod(
        rng,
        index=index,
        namespace=GPU_OPERATOR_NAMESPACE,
        generate_name=f"{name}-",
        owner=("apps/v1", "DaemonSet", name),
        labels=labels,
        annotations={"kubectl.kubernetes.io/default-container": main["name"]},
        spec=spec,
        node=_node(index, True),
    )
    # A DaemonSet's pods tolerate what its controller adds to every one of them.
    pod["spec"]["tolerations"] = [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists"},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "node.kubernetes.io/disk-pressure", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "node.kubernetes.io/memory-pressure", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "node.kubernetes.io/pid-pressure", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
    ]
    pod["spec"]["priority"] = 2000001000
    return pod


def pod(seed: int, index: int) -> dict[str, Any]:
    """The pod at index of the seed's cluster: the same whatever the cluster's size, so a smaller cluster's pods
    are a larger one's first pods."""
    rng = random.Random(f"{seed}/{index}")
    slot = index % _BLOCK
    if slot == 0:
        return _operator_pod(rng, index)
    if slot in _GPU_SLOTS:
        return _gpu_workload(rng, index)
    kind = rng.random()
    if kind < 0.15:
        return _batch_pod(rng, index)
    return _service_pod(rng, index, meshed=kind < 0.62)


def is_gpu_pod(value: dict[str, Any]) -> bool:
    """Whether a pod is one that GPU_SHARE counts: it asks for nvidia.com/gpu or is one of the GPU operator's."""
    if value["metadata"]["namespace"] == GPU_OPERATOR_NAMESPACE:
        return True
    return any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in value["spec"]["containers"])


# ---------------------------------------------------------------------------------------------------------------
# The pod list


def _item_text(value: dict[str, Any]) -> str:
    # Dumped as the one item of a top-level sequence, so that lines fold at the columns they have in the list.
    return yaml.dump([value], Dumper=_KubectlDumper, default_flow_style=False, sort_keys=True, allow_unicode=True)


class PodList:
    """`kubectl get pods -A -o yaml` of clusters of the seed's pods, each pod's text made once for all sizes."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._items: list[tuple[tuple[str, str], str]] = []

    def _grow(self, pods: int) -> None:
        for index in range(len(self._items), pods):
            value = pod(self.seed, index)
            key = (value["metadata"]["namespace"], value["metadata"]["name"])
            self._items.append((key, _item_text(value)))

    def chunks(self, pods: int) -> Iterator[str]:
        """The text of the list of the first `pods` pods, in pieces (a piece a pod), ordered as kubectl prints
        them."""
        self._grow(pods)
        yield "apiVersion: v1\nitems:\n"
        for _, text in sorted(self._items[:pods]):
            yield text
        yield 'kind: List\nmetadata:\n  resourceVersion: ""\n'

    def text(self, pods: int) -> str:
        return "".join(self.chunks(pods))

    def write(self, path: Any, pods: int) -> int:
        """Writes the list to path; its size in bytes."""
        size = 0
        with open(path, "w", encoding="utf-8") as out:
            for chunk in self.chunks(pods):
                out.write(chunk)
                size += len(chunk.encode())
        return size


def pod_list(pods: int, seed: int = 0) -> str:
    """The text `kubectl get pods -A -o yaml` prints for a cluster of that many of the seed's pods."""
    return PodList(seed).text(pods)


# ---------------------------------------------------------------------------------------------------------------
# helm template

_CHART = "gpu-operator"
_CHART_LABELS = {
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/instance": "gpu-operator",
    "helm.sh/chart": f"gpu-operator-{_OPERATOR_VERSION}",
}


_MIG_PARTED = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        1g.10gb: 7
"""
_GPU_CLIENTS = """\
version: v1
systemd-services:
  - nvsm.service
  - nvidia-persistenced.service
"""
_DEVICE_PLUGIN_CONFIG = """\
version: v1
flags:
  migStrategy: single
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
_DCGM_METRICS = """\
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
"""
_TOOLKIT_CONFIG = """\
[nvidia-container-runtime]
mode = "cdi"

[nvidia-container-runtime.modes.cdi]
default-kind = "management.nvidia.com/gpu"
annotation-prefixes = ["nvidia.cdi.k8s.io/"]
"""
_NFD_WORKER = """\
sources:
  pci:
    deviceClassWhitelist:
      - "02"
      - "0200"
      - "0207"
      - "0300"
      - "0302"
    deviceLabelFields:
      - vendor
"""
_CRD_UPGRADE = """\
kubectl apply -f /opt/gpu-operator/nvidia.com_clusterpolicies.yaml
kubectl apply -f /opt/gpu-operator/nvidia.com_nvidiadrivers.yaml
"""
# The DRA driver's device classes and the CEL selector each has.
_DEVICE_CLASSES = {
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "compute-domain-daemon.nvidia.com": "device.driver == 'compute-domain.nvidia.com'"
    " && device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
    "compute-domain-default-channel.nvidia.com": "device.driver == 'compute-domain.nvidia.com'"
    " && device.attributes['compute-domain.nvidia.com'].id == 0",
}


def _meta(name: str, namespace: Optional[str] = GPU_OPERATOR_NAMESPACE, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {"app.kubernetes.io/name": labels.pop("app", name), **_CHART_LABELS, **labels}
    return meta


def _template(
    name: str, labels: dict[str, str], pod_spec: dict[str, Any], annotations: Optional[dict[str, str]] = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": pod_spec}


def _chart_container(name: str, image: str, **fields: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    container.update(fields)
    return container


def _daemonset(name: str, container: dict[str, Any], **pod_fields: Any) -> dict[str, Any]:
    labels = {"app": name}
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        "priorityClassName": "system-node-critical",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    pod_spec.update(pod_fields)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(name, app=name),
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": _template(name, labels, pod_spec),
        },
    }


def _operator_daemonsets() -> list[tuple[str, dict[str, Any]]]:
    images = "nvcr.io/nvidia"
    host = _host_path
    node_selector = {"nvidia.com/gpu.present": "true"}
    privileged = {"privileged": True}
    sets = [
        _daemonset(
            "nvidia-device-plugin-daemonset",
            _chart_container(
                "nvidia-device-plugin",
                f"{images}/k8s-device-plugin:v0.17.4",
                command=["nvidia-device-plugin"],
                env=[
                    _env("PASS_DEVICE_SPECS", "true"),
                    _env("DEVICE_LIST_STRATEGY", "envvar"),
                    _env("NVIDIA_VISIBLE_DEVICES", "all"),
                    _env("NVIDIA_DRIVER_CAPABILITIES", "all"),
                ],
                securityContext=privileged,
                volumeMounts=[_mount("device-plugin", "/var/lib/kubelet/device-plugins")],
            ),
            runtimeClassName="nvidia",
            nodeSelector=node_selector,
            volumes=[host("device-plugin", "/var/lib/kubelet/device-plugins")],
        ),
        _daemonset(
            "nvidia-container-toolkit-daemonset",
            _chart_container(
                "nvidia-container-toolkit-ctr",
                f"{images}/k8s/container-toolkit:v1.17.8-ubuntu20.04",
                command=["/bin/bash", "-c"],
                args=["/bin/entrypoint.sh"],
                env=[
                    _env("ROOT", "/usr/local/nvidia"),
                    _env("RUNTIME", "containerd"),
                    _env("CONTAINERD_CONFIG", "/runtime/config-dir/config.toml"),
                    _env("CONTAINERD_SOCKET", "/runtime/sock-dir/containerd.sock"),
                    _env("CONTAINERD_RUNTIME_CLASS", "nvidia"),
                    _env("CONTAINERD_SET_AS_DEFAULT", "false"),
                    _env("CDI_ENABLED", "true"),
                    _env("NVIDIA_VISIBLE_DEVICES", "void"),
                ],
                securityContext=privileged,
                volumeMounts=[
                    _mount("toolkit-install-dir", "/usr/local/nvidia"),
                    _mount("containerd-config", "/runtime/config-dir/"),
                    _mount("containerd-socket", "/runtime/sock-dir/"),
                    _mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                ],
            ),
            hostPID=True,
            nodeSelector=node_selector,
            volumes=[
                host("toolkit-install-dir", "/usr/local/nvidia"),
                host("containerd-config", "/etc/containerd", "DirectoryOrCreate"),
                host("containerd-socket", "/run/containerd"),
                host("host-root", "/"),
            ],
        ),
        _daemonset(
            "nvidia-dcgm-exporter",
            _chart_container(
                "nvidia-dcgm-exporter",
                f"{images}/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
                env=[
                    _env("DCGM_EXPORTER_LISTEN", ":9400"),
                    _env("DCGM_EXPORTER_KUBERNETES", "true"),
                    _env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
                ],
                ports=[{"name": "metrics", "containerPort": 9400}],
                securityContext={"capabilities": {"add": ["SYS_ADMIN"]}},
                volumeMounts=[_mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources", read_only=True)],
            ),
            runtimeClassName="nvidia",
            nodeSelector=node_selector,
            volumes=[host("pod-gpu-resources", "/var/lib/kubelet/pod-resources")],
        ),
        _daemonset(
            "nvidia-operator-validator",
            _chart_container(
                "nvidia-operator-validator",
                f"{images}/cloud-native/gpu-operator-validator:{_OPERATOR_VERSION}",
                command=["sh", "-c"],
                args=["echo all validations are successful; sleep infinity"],
                securityContext=privileged,
            ),
            initContainers=[
                _chart_container(
                    f"{step}-validation",
                    f"{images}/cloud-native/gpu-operator-validator:{_OPERATOR_VERSION}",
                    command=["sh", "-c"],
                    args=["nvidia-validator"],
                    env=[_env("WITH_WAIT", "true"), _env("COMPONENT", step)],
                    securityContext=privileged,
                    volumeMounts=[
                        _mount("run-nvidia-validations", "/run/nvidia/validations", propagation="Bidirectional")
                    ],
                )
                for step in ("driver", "toolkit", "cuda", "plugin")
            ],
            runtimeClassName="nvidia",
            nodeSelector=node_selector,
            volumes=[host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate")],
        ),
        _daemonset(
            "gpu-feature-discovery",
            _chart_container(
                "gpu-feature-discovery",
                f"{images}/k8s-device-plugin:v0.17.4",
                command=["gpu-feature-discovery"],
                env=[_env("GFD_SLEEP_INTERVAL", "60s"), _env("NVIDIA_VISIBLE_DEVICES", "all")],
                volumeMounts=[_mount("output-dir", "/etc/kubernetes/node-feature-discovery/features.d")],
            ),
            runtimeClassName="nvidia",
            nodeSelector=node_selector,
            volumes=[host("output-dir", "/etc/kubernetes/node-feature-discovery/features.d")],
        ),
        _daemonset(
            "nvidia-mig-manager",
            _chart_container(
                "nvidia-mig-manager",
                f"{images}/cloud-native/k8s-mig-manager:v0.12.3-ubuntu20.04",
                env=[_env("CONFIG_FILE", "/mig-parted-config/config.yaml"), _env("WITH_REBOOT", "false")],
                securityContext=privileged,
                volumeMounts=[_mount("host-sys", "/sys"), _mount("mig-parted-config", "/mig-parted-config")],
            ),
            hostPID=True,
            hostIPC=True,
            runtimeClassName="nvidia",
            nodeSelector={"nvidia.com/gpu.deploy.mig-manager": "true"},
            volumes=[
                host("host-sys", "/sys", "Directory"),
                {"name": "mig-parted-config", "configMap": {"name": "default-mig-parted-config"}},
            ],
        ),
        _daemonset(
            "nvidia-driver-daemonset",
            _chart_container(
                "nvidia-driver-ctr",
                f"{images}/driver:{_DRIVER}-ubuntu22.04",
                command=["nvidia-driver"],
                args=["init"],
                securityContext=privileged,
                volumeMounts=[
                    _mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
                    _mount("host-os-release", "/host-etc/os-release", read_only=True),
                    _mount("dev-log", "/dev/log"),
                ],
            ),
            hostPID=True,
            nodeSelector={"nvidia.com/gpu.deploy.driver": "true"},
            volumes=[
                host("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
                host("host-os-release", "/etc/os-release"),
                host("dev-log", "/dev/log"),
            ],
        ),
        _daemonset(
            "nvidia-dcgm",
            _chart_container(
                "nvidia-dcgm-ctr",
                f"{images}/cloud-native/dcgm:4.2.3-1-ubuntu22.04",
                ports=[{"name": "dcgm", "containerPort": 5555, "hostPort": 5555}],
                securityContext={"capabilities": {"add": ["SYS_ADMIN"]}},
            ),
            runtimeClassName="nvidia",
            nodeSelector=node_selector,
        ),
        _daemonset(
            "nvidia-node-status-exporter",
            _chart_container(
                "nvidia-node-status-exporter",
                f"{images}/cloud-native/gpu-operator-validator:{_OPERATOR_VERSION}",
                args=["--metrics-port=8000"],
                ports=[{"name": "node-status", "containerPort": 8000}],
                securityContext=privileged,
                volumeMounts=[_mount("run-nvidia-validations", "/run/nvidia/validations")],
            ),
            nodeSelector=node_selector,
            volumes=[host("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate")],
        ),
        _daemonset(
            "node-feature-discovery-worker",
            _chart_container(
                "worker",
                "registry.k8s.io/nfd/node-feature-discovery:v0.17.3",
                command=["nfd-worker"],
                args=["-feature-gates=NodeFeatureAPI=true"],
                securityContext={"readOnlyRootFilesystem": True, "runAsNonRoot": True},
                volumeMounts=[
                    _mount("host-boot", "/host-boot", read_only=True),
                    _mount("host-sys", "/host-sys", read_only=True),
                    _mount("host-usr-lib", "/host-usr/lib", read_only=True),
                ],
            ),
            volumes=[host("host-boot", "/boot"), host("host-sys", "/sys"), host("host-usr-lib", "/usr/lib")],
        ),
        _daemonset(
            "nvidia-dra-driver-gpu-kubelet-plugin",
            _chart_container(
                "gpus",
                f"{images}/k8s-dra-driver-gpu:v25.8.0",
                command=["bash", "-c"],
                args=["exec gpu-kubelet-plugin --v=4"],
                env=[
                    _env("NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"),
                    _env("NVIDIA_VISIBLE_DEVICES", "void"),
                    _env("CDI_ROOT", "/var/run/cdi"),
                ],
                securityContext=privileged,
                volumeMounts=[
                    _mount("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                    _mount("plugins", "/var/lib/kubelet/plugins", propagation="Bidirectional"),
                    _mount("cdi", "/var/run/cdi"),
                    _mount("host-dev", "/dev"),
                    _mount("driver-root", "/driver-root", read_only=True, propagation="HostToContainer"),
                ],
            ),
            nodeSelector=node_selector,
            volumes=[
                host("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                host("plugins", "/var/lib/kubelet/plugins"),
                host("cdi", "/var/run/cdi"),
                host("host-dev", "/dev"),
                host("driver-root", "/run/nvidia/driver"),
            ],
        ),
        _daemonset(
            "nvidia-sandbox-device-plugin-daemonset",
            _chart_container(
                "nvidia-sandbox-device-plugin-ctr",
                f"{images}/kubevirt-gpu-device-plugin:v1.3.1",
                securityContext=privileged,
                volumeMounts=[_mount("device-plugin", "/var/lib/kubelet/device-plugins"), _mount("vfio", "/dev/vfio")],
            ),
            nodeSelector={"nvidia.com/gpu.deploy.sandbox-device-plugin": "true"},
            volumes=[host("device-plugin", "/var/lib/kubelet/device-plugins"), host("vfio", "/dev/vfio")],
        ),
    ]
    sources = {
        "node-feature-discovery-worker": "charts/node-feature-discovery/templates/worker.daemonset.yaml",
        "nvidia-dra-driver-gpu-kubelet-plugin": "charts/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml",
    }
    return [
        (sources.get(s["metadata"]["name"], f"templates/{s['metadata']['name'].replace('-daemonset', '')}.yaml"), s)
        for s in sets
    ]


def _rbac(name: str, namespace: str, source: str) -> list[tuple[str, dict[str, Any]]]:
    """A component's service account, cluster role, role and their bindings, as the chart's rbac template makes
    them."""
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    return [
        (source, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace)}),
        (
            source,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": _meta(name, None),
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["*"]},
                ],
            },
        ),
        (
            source,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": _meta(name, None),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subject,
            },
        ),
        (
            source,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _meta(name, namespace),
                "rules": [
                    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list", "watch"]},
                    {
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "verbs": ["get", "create", "update"],
                    },
                ],
            },
        ),
        (
            source,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _meta(name, namespace),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subject,
            },
        ),
    ]


def _deployment(name: str, namespace: str, container: dict[str, Any], **pod_fields: Any) -> dict[str, Any]:
    labels = {"app": name}
    pod_spec = {"serviceAccountName": name, "containers": [container], **pod_fields}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace, app=name),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate"},
            "template": _template(
                name, labels, pod_spec, {"kubectl.kubernetes.io/default-container": container["name"]}
            ),
        },
    }


def _cuda_job_spec(rng: random.Random, name: str, gpus: int, privileged: bool) -> dict[str, Any]:
    container = _chart_container(
        name,
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        resources={"limits": {"nvidia.com/gpu": gpus}},
        env=[_env("CUDA_LAUNCH_BLOCKING", "1"), _env("RUN_ID", f"{rng.getrandbits(32):08x}")],
    )
    if privileged:
        container["securityContext"] = {"privileged": True}
    return {
        "backoffLimit": 2,
        "ttlSecondsAfterFinished": 3600,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "restartPolicy": "OnFailure",
                "runtimeClassName": "nvidia",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [container],
            },
        },
    }


def helm_objects(seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The objects of the install, each with the template path helm names in its `# Source:` comment."""
    rng = random.Random(f"{seed}/helm")
    ns = GPU_OPERATOR_NAMESPACE
    out: list[tuple[str, dict[str, Any]]] = []
    tenants = ["ml-training", "inference", "research", "nvidia-dra-driver-gpu", "data-science", "vision", "speech"]
    for namespace in [ns, *tenants]:
        labels = {"pod-security.kubernetes.io/enforce": "privileged" if namespace in (ns, tenants[3]) else "baseline"}
        out.append(
            (
                "templates/namespaces.yaml",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace, None, **labels)},
            )
        )
    components = [
        ("gpu-operator", "templates/rbac.yaml"),
        ("nvidia-device-plugin", "templates/plugin-rbac.yaml"),
        ("nvidia-container-toolkit", "templates/toolkit-rbac.yaml"),
        ("nvidia-dcgm-exporter", "templates/dcgm-exporter-rbac.yaml"),
        ("nvidia-operator-validator", "templates/validator-rbac.yaml"),
        ("gpu-feature-discovery", "templates/gfd-rbac.yaml"),
        ("nvidia-mig-manager", "templates/mig-manager-rbac.yaml"),
        ("nvidia-driver", "templates/driver-rbac.yaml"),
        ("node-feature-discovery-master", "charts/node-feature-discovery/templates/master-rbac.yaml"),
        ("node-feature-discovery-worker", "charts/node-feature-discovery/templates/worker-rbac.yaml"),
        ("node-feature-discovery-gc", "charts/node-feature-discovery/templates/gc-rbac.yaml"),
        ("nvidia-dra-driver-gpu-controller", "charts/nvidia-dra-driver-gpu/templates/controller-rbac.yaml"),
        ("nvidia-dra-driver-gpu-kubelet-plugin", "charts/nvidia-dra-driver-gpu/templates/kubeletplugin-rbac.yaml"),
        ("nvidia-node-status-exporter", "templates/node-status-exporter-rbac.yaml"),
        ("nvidia-sandbox-device-plugin", "templates/sandbox-rbac.yaml"),
        ("gpu-operator-upgrade", "templates/upgrade-crd-rbac.yaml"),
    ]
    for name, source in components:
        out += _rbac(name, tenants[3] if "dra-driver" in name else ns, source)
    for name in ("inference", "ml-training", "research", "data-science"):
        out.append(
            (
                "templates/tenant-serviceaccounts.yaml",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(f"{name}-runner", name)},
            )
        )
    configs = [
        ("default-mig-parted-config", {"config.yaml": _MIG_PARTED}),
        ("default-gpu-clients", {"clients.yaml": _GPU_CLIENTS}),
        ("nvidia-device-plugin-config", {"default": _DEVICE_PLUGIN_CONFIG}),
        ("dcgm-exporter-metrics", {"dcp-metrics-included.csv": _DCGM_METRICS}),
        ("nvidia-container-toolkit-config", {"config.toml": _TOOLKIT_CONFIG}),
        ("node-feature-discovery-master-conf", {"nfd-master.conf": "extraLabelNs:\n  - nvidia.com\n"}),
        ("node-feature-discovery-worker-conf", {"nfd-worker.conf": _NFD_WORKER}),
        (
            "nvidia-dra-driver-gpu-config",
            {"featureGates": "DynamicMIG=false,TimeSlicingSettings=true,MPSSupport=true\n"},
        ),
    ]
    for name, data in configs:
        source = (
            "charts/node-feature-discovery/templates/nfd-configmaps.yaml"
            if name.startswith("node-feature")
            else "templates/configmaps.yaml"
        )
        namespace = tenants[3] if "dra-driver" in name else ns
        out.append(
            (source, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace), "data": data})
        )
    while sum(1 for _, o in out if o["kind"] == "ConfigMap") < HELM_KINDS["ConfigMap"]:
        n = sum(1 for _, o in out if o["kind"] == "ConfigMap")
        tenant = tenants[n % len(tenants)]
        data = {f"setting_{k}": f"{rng.choice(['on', 'off', 'auto', '42', 'yes'])}" for k in range(rng.randint(3, 8))}
        data["train.yaml"] = (
            f"epochs: {rng.randint(1, 90)}\nbatch_size: {rng.choice([32, 64, 128])}\nlr: {rng.random() / 100:.5f}\n"
        )
        out.append(
            (
                "templates/tenant-configmaps.yaml",
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": _meta(f"{tenant}-settings-{n}", tenant),
                    "data": data,
                },
            )
        )
    services = [
        ("gpu-operator", ns, 8080),
        ("nvidia-dcgm-exporter", ns, 9400),
        ("nvidia-node-status-exporter", ns, 8000),
        ("node-feature-discovery-master", ns, 8080),
        ("nvidia-dra-driver-gpu-controller", tenants[3], 8080),
        ("nvidia-dcgm", ns, 5555),
    ]
    inference = [(f"{tenants[i % 3]}-triton-{i}", tenants[i % 3]) for i in range(HELM_KINDS["Service"] - len(services))]
    services += [(name, team, 8000) for name, team in inference]
    for name, namespace, port in services:
        service_port = {
            "name": "http" if port == 8000 else "metrics",
            "port": port,
            "targetPort": port,
            "protocol": "TCP",
        }
        spec: dict[str, Any] = {"type": "ClusterIP", "selector": {"app": name}, "ports": [service_port]}
        source = "templates/tenant-inference.yaml" if "-triton-" in name else "templates/services.yaml"
        out.append((source, {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, namespace), "spec": spec}))
    nfd = "registry.k8s.io/nfd/node-feature-discovery:v0.17.3"
    operator = _chart_container(
        "gpu-operator",
        f"nvcr.io/nvidia/gpu-operator:{_OPERATOR_VERSION}",
        command=["gpu-operator"],
        args=["--leader-elect", "--zap-time-encoding=epoch", "--zap-log-level=info"],
        env=[
            _field("OPERATOR_NAMESPACE", "metadata.namespace"),
            _env("DRIVER_MANAGER_IMAGE", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1"),
        ],
        resources={"limits": {"cpu": "500m", "memory": "350Mi"}, "requests": {"cpu": "200m", "memory": "100Mi"}},
    )
    deployments = [
        (
            "templates/operator.yaml",
            _deployment("gpu-operator", ns, operator, priorityClassName="system-node-critical"),
        ),
        (
            "charts/node-feature-discovery/templates/master.yaml",
            _deployment(
                "node-feature-discovery-master",
                ns,
                _chart_container("master", nfd, command=["nfd-master"], args=["-crd-controller=true"]),
            ),
        ),
        (
            "charts/node-feature-discovery/templates/nfd-gc.yaml",
            _deployment(
                "node-feature-discovery-gc",
                ns,
                _chart_container("gc", nfd, command=["nfd-gc"], args=["-gc-interval=1h"]),
            ),
        ),
        (
            "charts/nvidia-dra-driver-gpu/templates/controller.yaml",
            _deployment(
                "nvidia-dra-driver-gpu-controller",
                tenants[3],
                _chart_container(
                    "compute-domains",
                    "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0",
                    command=["compute-domain-controller", "-v", "4"],
                ),
            ),
        ),
    ]
    for i, (name, team) in enumerate(inference[: HELM_KINDS["Deployment"] - len(deployments)]):
        gpus = rng.choice([1, 1, 2])
        container = _chart_container(
            "triton",
            "nvcr.io/nvidia/tritonserver:25.08-py3",
            args=["tritonserver", "--model-repository=/models", "--strict-readiness=true"],
            env=[_env("NVIDIA_VISIBLE_DEVICES", "all")] if i % 4 == 0 else [_env("TRITON_LOG_VERBOSE", "0")],
            ports=[{"name": "http", "containerPort": 8000}, {"name": "grpc", "containerPort": 8001}],
            resources={
                "limits": {"nvidia.com/gpu": gpus},
                "requests": {"nvidia.com/gpu": gpus, "cpu": "4", "memory": "16Gi"},
            },
        )
        if i % 3 == 0:
            container["securityContext"] = {"privileged": True}
        deployment = _deployment(name, team, container, runtimeClassName="nvidia")
        deployment["spec"]["template"]["spec"]["serviceAccountName"] = f"{team}-runner"
        deployment["metadata"]["labels"]["app.kubernetes.io/component"] = "inference"
        deployments.append(("templates/tenant-inference.yaml", deployment))
    out += deployments
    out += _operator_daemonsets()
    for name, handler in (("nvidia", "nvidia"), ("nvidia-cdi", "nvidia-cdi"), ("nvidia-legacy", "nvidia-legacy")):
        out.append(
            (
                "templates/runtimeclasses.yaml",
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": _meta(name, None),
                    "handler": handler,
                    "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                },
            )
        )
    for name, expression in _DEVICE_CLASSES.items():
        out.append(
            (
                "charts/nvidia-dra-driver-gpu/templates/deviceclass-" + name.split(".")[0] + ".yaml",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": _meta(name, None),
                    "spec": {"selectors": [{"cel": {"expression": expression}}]},
                },
            )
        )
    for i in range(HELM_KINDS["ResourceClaimTemplate"]):
        team = tenants[i % 3]
        device_class = "mig.nvidia.com" if i % 4 == 3 else "gpu.nvidia.com"
        request: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1 + i % 2}
        if i % 2:
            request["selectors"] = [
                {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}
            ]
        out.append(
            (
                "templates/tenant-claims.yaml",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": _meta(f"{team}-gpu-claim-{i}", team),
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
                },
            )
        )
    hooks = {"helm.sh/hook": "pre-upgrade", "helm.sh/hook-delete-policy": "hook-succeeded,before-hook-creation"}
    for i in range(HELM_KINDS["Job"]):
        if i < 2:
            name = ("gpu-operator-upgrade-crd", "gpu-operator-cleanup-crd")[i]
            spec = {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"name": name},
                    "spec": {
                        "serviceAccountName": "gpu-operator-upgrade",
                        "restartPolicy": "OnFailure",
                        "containers": [
                            _chart_container(
                                "upgrade-crd",
                                f"nvcr.io/nvidia/gpu-operator:{_OPERATOR_VERSION}",
                                command=["/bin/sh", "-c"],
                                args=[_CRD_UPGRADE],
                            )
                        ],
                    },
                },
            }
            meta = _meta(name, ns)
            meta["annotations"] = dict(hooks, **({"helm.sh/hook": "pre-delete"} if i else {}))
            out.append(
                (
                    "templates/upgrade_crd.yaml" if i == 0 else "templates/cleanup_crd.yaml",
                    {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec},
                )
            )
        else:
            team = tenants[i % 3]
            name = f"{team}-cuda-validation-{i}"
            out.append(
                (
                    "templates/tenant-validation.yaml",
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": _meta(name, team),
                        "spec": _cuda_job_spec(rng, name, 1 + i % 2, i % 5 == 0),
                    },
                )
            )
    for i in range(HELM_KINDS["CronJob"]):
        team = tenants[i % 3]
        name = f"{team}-nightly-{('train', 'eval', 'dcgm-diag', 'cleanup')[i % 4]}-{i}"
        out.append(
            (
                "templates/tenant-cronjobs.yaml",
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "metadata": _meta(name, team),
                    "spec": {
                        "schedule": f"{rng.randint(0, 59)} {rng.randint(0, 5)} * * *",
                        "concurrencyPolicy": "Forbid",
                        "successfulJobsHistoryLimit": 3,
                        "failedJobsHistoryLimit": 1,
                        "jobTemplate": {"spec": _cuda_job_spec(rng, name, rng.choice([1, 2, 4, 8]), i % 4 == 2)},
                    },
                },
            )
        )
    return out


# helm's install order (releaseutil.InstallOrder), as far as this install has the kinds; kinds it does not know
# (RuntimeClass, the DRA kinds) follow, alphabetically, and hooks come last.
_HELM_ORDER = (
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Deployment",
    "Job",
    "CronJob",
)


def _helm_rank(item: tuple[str, dict[str, Any]]) -> tuple[int, int, str]:
    _, value = item
    hook = "helm.sh/hook" in value["metadata"].get("annotations", {})
    kind = value["kind"]
    known = _HELM_ORDER.index(kind) if kind in _HELM_ORDER else len(_HELM_ORDER)
    return (int(hook), known, "" if kind in _HELM_ORDER else kind)


def helm_template(seed: int = 0) -> str:
    """The text `helm template gpu-operator ...` prints for the install: each object after a `---` line and
    a `# Source:` comment naming its template, in helm's install order."""
    parts = []
    for source, value in sorted(helm_objects(seed), key=_helm_rank):
        body = yaml.dump(value, Dumper=_HelmDumper, default_flow_style=False, sort_keys=False, width=1 << 16)
        parts.append(f"---\n# Source: {_CHART}/{source}\n{body}")
    return "".join(parts)
