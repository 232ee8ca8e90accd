from __future__ import annotations

import pytest

from nvidia_oci_hook.kinds.cdinames import cdi_name_error


@pytest.mark.parametrize(
    "name",
    [
        "nvidia.com/gpu=0",
        "nvidia.com/gpu=all",
        "vendor.io/mig-1g.5gb=GPU-ab:1",
        "a1/b2=0",
        "x9/cl=1",
        "nvidia.com/gpu=7",
    ],
)
def test_qualified_names(name: str) -> None:
    assert cdi_name_error(name) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("gpu0", "not a qualified CDI device name"),
        ("/dev/nvidia0", "not a qualified CDI device name"),
        ("nvidia.com/gpu", "not a qualified CDI device name"),
        ("nvidia.com=0", "not a qualified CDI device name"),
        (" nvidia.com/gpu=0", "must start with a letter"),
        ("1nvidia.com/gpu=0", "must start with a letter"),
        ("nvidia.com/gpu/x=0", "invalid character '/'"),
        ("nvidia.com/gpu=0 ", "must end with a letter or digit"),
        ("nvidia.com/gpu=a=b", "invalid character '='"),
        ("n/gpu=0", "single character"),
        ("nvidia.com-/gpu=0", "must end with a letter or digit"),
        ("nvidiä.com/gpu=0", "invalid character"),
    ],
)
def test_rejected_names(name: str, reason: str) -> None:
    error = cdi_name_error(name)
    assert error is not None and reason in error
