"""A CDI annotation under containerd 1.6 through CRI: ignored by containerd (it skips enable_cdi), applied when
runc is reached through the wrapper as the runc shim's BinaryName."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cri import CRIDaemon, SpecRecorder, run_pod_container
from tests.e2e.gpu_request import ANNOTATION, PROBE, Wrapper

pytestmark = [pytest.mark.runtime, pytest.mark.root]

REQUEST = dict([ANNOTATION])
COMMAND = ["sh", "-c", PROBE]


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory) -> Wrapper:
    assert os.geteuid() == 0, "these tests need root"
    return Wrapper(tmp_path_factory.mktemp("containerd-cdi"))


def _daemon(binary_name: Path, wrapper: Wrapper) -> CRIDaemon:
    # enable_cdi and cdi_spec_dirs as a 1.7 node would have them: 1.6 ignores both.
    return CRIDaemon.start(
        binary_name=binary_name,
        container_annotations=["cdi.k8s.io/*"],
        enable_cdi=True,
        cdi_spec_dirs=[wrapper.config.parent / "cdi"],
    )


@pytest.fixture(scope="module")
def plain(wrapper: Wrapper) -> Iterator[tuple[CRIDaemon, SpecRecorder]]:
    recorder = SpecRecorder.write(wrapper.config.parent / "plain")
    with _daemon(recorder.path, wrapper) as daemon:
        yield daemon, recorder


@pytest.fixture(scope="module")
def wrapped(wrapper: Wrapper) -> Iterator[tuple[CRIDaemon, Wrapper]]:
    with _daemon(wrapper.runtime, wrapper) as daemon:
        yield daemon, wrapper


def test_containerd_16_ignores_the_cdi_request(plain: tuple[CRIDaemon, SpecRecorder]) -> None:
    daemon, recorder = plain
    result = run_pod_container(daemon, command=COMMAND, annotations=REQUEST)
    assert result.ran, result.error
    assert "env=\n" in result.stdout
    assert "can't stat '/dev/nvidia0'" in result.output
    spec = recorder.spec(result.container_id or "")
    assert spec is not None and spec["annotations"]["cdi.k8s.io/gpu"] == "example.com/gpu=0"  # it reached the spec
    assert "GPU_FROM_CDI=1" not in spec["process"]["env"]


def test_the_wrapper_applies_it(wrapped: tuple[CRIDaemon, Wrapper]) -> None:
    daemon, wrapper = wrapped
    result = run_pod_container(daemon, command=COMMAND, annotations=REQUEST)
    assert result.ran, result.error
    lines = result.stdout.splitlines()
    assert lines[:2] == ["env=1", "c3:0"]
    assert "No such device or address" in result.output  # allowed: the driver, absent here, answers ENXIO
    mine = [entry for entry in wrapper.entries() if entry["container"] == result.container_id]
    assert len(mine) == 1 and {edit["code"] for edit in mine[0]["edits"]} == {"REC006"}


def test_a_refusal_reaches_the_cri_caller_in_runc_style(wrapped: tuple[CRIDaemon, Wrapper]) -> None:
    daemon, _ = wrapped
    result = run_pod_container(daemon, command=COMMAND, annotations={"cdi.k8s.io/gpu": "example.com/gpu=9"})
    assert not result.ran
    # The shim reads the runc-style JSON line from its --log file: containerd's error quotes our message.
    assert result.error is not None and "nvidia-oci-hook: refusing container" in result.error, result.error
    assert "[REC001] CDI device example.com/gpu=9" in result.error
    # The reason reaches the CRI caller too: the spec defines 0, not 9.
    assert "is unresolvable (not-defined)" in result.error and "defined: example.com/gpu=0" in result.error
