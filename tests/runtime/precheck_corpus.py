"""What the fronts' pre-checks are held to: every config of the schema-agreement corpus (real specs from runc,
crun, containerd and podman, enriched and mutated), the project's OCI examples and corpus, and variants of them
that carry each thing the plan acts on, each written compact (as runc, crun and containerd write config.json),
indented with tabs and Go's escapes (as cri-o writes it), and indented with spaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.documents.corpus import base_documents, corpus, other_real_documents
from tests.e2e.bundles import base_config

REPOSITORY = Path(__file__).resolve().parents[2]
DRIVER_ROOT = "/run/nvidia/driver"
# A variant the plan refuses (GPU001) though it needs no edit: the GPU node is allowed, the control node missing.
GPU_WITHOUT_CONTROL = "a GPU node, allowed, without the control node"


def variants(name: str, config: Any) -> list[tuple[str, Any]]:
    """The config itself, and the config with each thing the plan acts on added, or escaped out of sight."""
    found = [(name, config)]
    if not isinstance(config, dict):
        return found

    def changed(label: str, change: Any) -> None:
        copy = json.loads(json.dumps(config))
        change(copy)
        found.append((f"{name} + {label}", copy))

    def section(value: dict[str, Any], key: str, default: Any) -> Any:
        if not isinstance(value.get(key), type(default)):
            value[key] = default
        return value[key]

    def env(value: dict[str, Any], entry: str) -> None:
        process = section(value, "process", {})
        section(process, "env", []).append(entry)

    def device(value: dict[str, Any]) -> None:
        section(section(value, "linux", {}), "devices", []).append(
            {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}
        )

    def gpu_without_control(value: dict[str, Any]) -> None:
        linux = section(value, "linux", {})
        listed = section(linux, "devices", [])
        listed[:] = [
            entry for entry in listed if not (isinstance(entry, dict) and entry.get("path") == "/dev/nvidiactl")
        ]
        listed.append({"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0})
        section(section(linux, "resources", {}), "devices", []).append(
            {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"}
        )

    def mount(value: dict[str, Any], source: str) -> None:
        section(value, "mounts", []).append(
            {"destination": "/usr/lib/libcuda.so.1", "type": "bind", "source": source, "options": ["rbind", "ro"]}
        )

    def hook(value: dict[str, Any], path: str) -> None:
        section(section(value, "hooks", {}), "prestart", []).append({"path": path})

    changed("CDI annotation", lambda v: section(v, "annotations", {}).update({"cdi.k8s.io/gpu": "nvidia.com/gpu=0"}))
    changed("CDI name in NVIDIA_VISIBLE_DEVICES", lambda v: env(v, "NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"))
    changed("NVIDIA_VISIBLE_DEVICES=all", lambda v: env(v, "NVIDIA_VISIBLE_DEVICES=all"))
    changed("a device node", device)
    changed(GPU_WITHOUT_CONTROL, gpu_without_control)
    changed("a mount under the driver root", lambda v: mount(v, DRIVER_ROOT + "/usr/lib/libcuda.so.1"))
    changed("a missing mount source", lambda v: mount(v, "/nonexistent/libcuda.so.1"))
    changed("a hook under the driver root", lambda v: hook(v, DRIVER_ROOT + "/usr/bin/nvidia-ctk"))
    changed("a missing hook", lambda v: hook(v, "/nonexistent/nvidia-ctk"))
    changed("quotes and markup in an argument", lambda v: env(v, 'SCRIPT=echo "<a href=x>&</a>"\n\t\\'))
    changed("a key spelled with an escape", lambda v: section(v, "annotations", {}).update({"d\u00e9vices": "x"}))
    return found


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def go_indented(value: Any) -> str:
    """As cri-o writes config.json: Go's json.MarshalIndent with a tab, which escapes <, >, & and the line and
    paragraph separators as encoding/json always does."""
    text = json.dumps(value, indent="\t", separators=(",", ": "), ensure_ascii=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def texts(value: Any) -> list[tuple[str, bytes]]:
    written = compact(value)
    forms = [("compact", written), ("indented", json.dumps(value, indent=2)), ("cri-o", go_indented(value))]
    # Escapes the dispatcher must see through or refuse: "/" written as "\/", letters as "\u0063" and "\u0056";
    # in the compact text and in cri-o's.
    for shape, plain in (("", written), ("cri-o, ", go_indented(value))):
        escaped_letters = plain.replace('"devices"', '"devi\\u0063es"').replace('"ociVersion"', '"oci\\u0056ersion"')
        for label, text in (("escaped slashes", plain.replace("/", "\\/")), ("escaped letters", escaped_letters)):
            if text != plain:
                forms.append((shape + label, text))
    return [(label, text.encode("utf-8")) for label, text in forms]


def rich_documents() -> list[tuple[str, Any]]:
    """The real specs, the project's examples and OCI corpus, and a busybox container with nothing GPU in it."""
    documents = [
        (name, document) for name, kind, document in base_documents() + other_real_documents() if kind == "oci"
    ]
    for path in [
        *sorted((REPOSITORY / "examples").glob("*.json")),
        *sorted((REPOSITORY / "tests/oci/corpus").glob("*.json")),
    ]:
        value = json.loads(path.read_text())
        if isinstance(value, dict) and "process" in value:
            documents.append((path.name, value))
    documents.append(("busybox", base_config(Path("/nonexistent-rootfs"), "true")))
    documents += [(name, json.loads(raw)) for name, raw in crio_specs()]
    return documents


CRIO_SPECS = Path(__file__).parent / "crio-specs"


def crio_specs() -> list[tuple[str, bytes]]:
    """config.json as cri-o 1.37 wrote it for busybox containers in host-network pods (plain; a device; in a
    privileged pod; with annotations and an environment that Go escapes; a GPU asked for by CDI, as
    cdi_devices and as an annotation), kept byte for byte."""
    return [(f"cri-o 1.37 {path.stem}", path.read_bytes()) for path in sorted(CRIO_SPECS.glob("*.json"))]


def corpus_configs() -> list[tuple[str, Any, list[tuple[str, bytes]]]]:
    """(label, config, its texts): the corpus as an engine writes it, the specs cri-o wrote as it wrote them, and
    the richer documents in every form and variant."""
    found = [
        (name, document, [("compact", compact(document).encode("utf-8"))])
        for name, kind, document in corpus()
        if kind == "oci"
    ]
    for name, raw in crio_specs():
        document = json.loads(raw)
        found.append((name, document, [("compact", compact(document).encode("utf-8")), ("cri-o", raw)]))
    for name, document in rich_documents():
        for variant, config in variants(name, document):
            found.append((variant, config, texts(config)))
    return found
