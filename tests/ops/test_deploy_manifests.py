"""docs/deploy.md's manifests: valid against the Kubernetes schemas (kubernetes-validate's,
shipped in the package, strict: no unknown field), the KEDA ScaledObject against the
fields KEDA documents, and consistent with the worker and the exporter they run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from sharecon.cli import build_parser
from sharecon.exporter import GroupState, render

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
#: The Kubernetes version the manifests are checked against (kubernetes-validate ships it).
KUBERNETES = "1.33.0"

# KEDA's ScaledObject (keda.sh/v1alpha1) as KEDA documents it (the ScaledObject
# specification and the prometheus scaler: serverAddress, query and threshold required,
# metadata values are strings); nested objects the guide does not use are not described.
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}},
        },
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string"},
                        "kind": {"type": "string"},
                        "apiVersion": {"type": "string"},
                        "envSourceContainerName": {"type": "string"},
                    },
                },
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "idleReplicaCount": {"type": "integer", "minimum": 0},
                "initialCooldownPeriod": {"type": "integer", "minimum": 0},
                "advanced": {"type": "object"},
                "fallback": {"type": "object"},
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "properties": {
                            "type": {"const": "prometheus"},
                            "metadata": {
                                "type": "object",
                                "required": ["serverAddress", "query", "threshold"],
                                "additionalProperties": {"type": "string"},
                                "properties": {
                                    "serverAddress": {"type": "string", "pattern": "^https?://"},
                                    "query": {"type": "string"},
                                    "threshold": {"type": "string", "pattern": r"^\d+(\.\d+)?$"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def _manifests() -> list[dict[str, Any]]:
    blocks = re.findall(r"^```yaml\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)
    docs = [d for block in blocks for d in yaml.safe_load_all(block) if d]
    assert docs, "docs/deploy.md has no manifests"
    return docs


def _by_kind(kind: str, name: str) -> dict[str, Any]:
    return next(m for m in _manifests() if m["kind"] == kind and m["metadata"]["name"] == name)


def test_kubernetes_resources_match_the_schemas() -> None:
    kinds = []
    for manifest in _manifests():
        kinds.append(manifest["kind"])
        if manifest["apiVersion"].startswith("keda.sh/"):
            jsonschema.validate(manifest, SCALED_OBJECT)
        else:
            kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    assert sorted(kinds) == ["Deployment", "Deployment", "ScaledObject", "Service"]


def test_a_mistake_is_caught() -> None:
    bad = _by_kind("Deployment", "billing-worker")
    bad["spec"]["template"]["spec"]["terminationGracePeriod"] = 60  # misspelt
    try:
        kubernetes_validate.validate(bad, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError:
        pass
    else:
        raise AssertionError("a misspelt field passed the schema")


def test_the_worker_drains_within_the_grace_period() -> None:
    deployment = _by_kind("Deployment", "billing-worker")
    pod = deployment["spec"]["template"]["spec"]
    # The image's entry point is `python3 -m sharecon.cli worker`: the args follow it.
    args = build_parser().parse_args(["worker", *pod["containers"][0]["args"]])
    assert args.command == "worker"
    # Draining takes --grace for records in flight, then leaving (bounded by --timeout).
    assert pod["terminationGracePeriodSeconds"] >= args.grace + args.timeout + 10


def test_the_worker_probes_ask_its_health_endpoints() -> None:
    pod = _by_kind("Deployment", "billing-worker")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = build_parser().parse_args(["worker", *container["args"]])
    # The kubelet probes the pod's address: the endpoints must not listen on loopback only.
    assert args.health_host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports[get["port"]] == args.health_port


def test_keda_scales_the_worker_on_a_metric_the_exporter_serves() -> None:
    scaled = _by_kind("ScaledObject", "billing-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "billing-worker"
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    family = re.search(r"(sharecon_\w+)\{group=\"(\w+)\"\}", query)
    assert family is not None
    exporter = _by_kind("Deployment", "sharecon-exporter")
    container = exporter["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["command"][3:] + container["args"])
    assert args.command == "exporter"
    assert family.group(2) in args.groups
    assert args.host == "0.0.0.0"
    assert container["ports"][0]["containerPort"] == args.port
    assert f"# TYPE {family.group(1)} gauge" in render([GroupState("g", None)])
    service = _by_kind("Service", "sharecon-exporter")
    assert service["spec"]["ports"][0]["port"] == args.port
