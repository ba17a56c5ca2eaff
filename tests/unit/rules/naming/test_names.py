"""Hardware names fold into the short, label-safe words admins see in keys and label values (§7.1, §7.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.rules.naming.names import normalize_name, sanitize_label_value
from tests.unit.rules.builders import is_label_value

XEON_8358 = "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz"


@pytest.mark.parametrize(
    ("name", "prefix", "max_length", "strip", "want"),
    [
        pytest.param("AMD Instinct MI300X OAM", "amd", 49, False, "instinct-mi300x-oam", id="amd-mi300x"),
        pytest.param("AMD Instinct MI308X OAM", "amd", 49, False, "instinct-mi308x-oam", id="amd-mi308x"),
        pytest.param(
            "Navi 32 [Radeon RX 7700 XT / 7800 XT]",
            "amd",
            49,
            False,
            "navi-32-radeon-rx-7700-xt-7800-xt",
            id="amd-navi-brackets-and-slash",
        ),
        pytest.param("Ascend910B2", "ascend", 46, False, "910b2", id="ascend-prefix-glued-to-model"),
        pytest.param("310P3", "ascend", 46, False, "310p3", id="ascend-no-prefix"),
        pytest.param("K100_AI", "hygon", 47, False, "k100_ai", id="hygon-underscore-kept"),
        pytest.param("MXC500", "metax", 47, False, "mxc500", id="metax"),
        pytest.param("NVIDIA A100", "nvidia", 46, False, "a100", id="nvidia-a100"),
        pytest.param("NVIDIA H100 80GB HBM3", "nvidia", 46, False, "h100-80gb-hbm3", id="nvidia-h100"),
        pytest.param("NVIDIA H200", "nvidia", 46, False, "h200", id="nvidia-h200"),
        pytest.param("Tesla 4", "nvidia", 46, False, "tesla-4", id="nvidia-without-vendor-word"),
        pytest.param(
            XEON_8358, "intel", 0, True, "xeon-platinum-8358", id="xeon-frequency-and-marks-stripped"
        ),
        pytest.param(
            "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz",
            "intel",
            0,
            True,
            "xeon-platinum-8480",
            id="xeon-plus",
        ),
        pytest.param(
            "Intel(R) Core(TM) i9-14900K", "intel", 0, True, "core-i9-14900k", id="core-tm-stripped"
        ),
        pytest.param(XEON_8358, "intel", 10, True, "xeon-plati", id="truncated-to-max-length"),
        pytest.param(
            "AMD EPYC 7763 64-Core Processor", "amd", 0, True, "epyc-7763", id="epyc-core-count-stripped"
        ),
        pytest.param(
            "AMD Ryzen 9 7950X 16-Core Processor",
            "amd",
            0,
            True,
            "ryzen-9-7950x",
            id="ryzen-core-count-stripped",
        ),
        pytest.param(
            "AMD Ryzen Threadripper PRO 5995WX 64-Cores",
            "amd",
            0,
            True,
            "ryzen-threadripper-pro-5995wx",
            id="plural-cores-stripped",
        ),
        pytest.param(
            "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz",
            "intel",
            0,
            True,
            "core-i7-1165g7",
            id="11th-gen-lead-in",
        ),
        pytest.param(
            "13th Gen Intel(R) Core(TM) i9-13900K", "intel", 0, True, "core-i9-13900k", id="13th-gen-lead-in"
        ),
        pytest.param(
            "Genuine Intel(R) CPU 0000 @ 2.00GHz", "intel", 0, True, "cpu-0000", id="genuine-lead-in"
        ),
        pytest.param(
            "AMD EPYC 7763 64-Core Processor",
            "amd",
            0,
            False,
            "epyc-7763-64-core-processor",
            id="no-strip-keeps-core-count",
        ),
        pytest.param(
            "Intel(R) Core(TM) i9-14900K", "intel", 0, False, "r-coretm-i9-14900k", id="no-strip-keeps-marks"
        ),
        pytest.param("NVIDIA", "nvidia", 46, False, "", id="only-the-vendor-word"),
        pytest.param("", "nvidia", 46, False, "", id="empty"),
        pytest.param("   ", "", 0, False, "", id="only-spaces"),
    ],
)
def test_normalize_name(name: str, prefix: str, max_length: int, strip: bool, want: str) -> None:
    assert normalize_name(name, prefix, max_length, strip) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("abc123", "abc123", id="already-valid"),
        pytest.param("a!b@c#1$2%3^()[]{}", "abc123", id="symbols-dropped"),
        pytest.param("a.b_c-1 2  -  3  .  ", "a.b_c-1-2-3", id="spaces-and-separators-collapse"),
        pytest.param("-_ .abc123.-_ ", "abc123", id="no-leading-or-trailing-separator"),
        pytest.param("a.b_c-1 2  -  3  .  " + "x" * 78, "a.b_c-1-2-3-" + "x" * 51, id="cut-at-63"),
        pytest.param("Tesla T4", "Tesla-T4", id="case-kept"),
    ],
)
def test_sanitize_label_value(value: str, want: str) -> None:
    assert sanitize_label_value(value) == want


@given(st.text())
def test_sanitized_text_is_always_a_valid_label_value(text: str) -> None:
    assert is_label_value(sanitize_label_value(text))


@given(
    st.text(), st.sampled_from(["", "amd", "intel", "nvidia", "generic"]), st.integers(0, 63), st.booleans()
)
def test_normalized_name_is_a_lower_case_label_value_within_its_budget(
    name: str, prefix: str, max_length: int, strip: bool
) -> None:
    out = normalize_name(name, prefix, max_length, strip)
    assert is_label_value(out)
    assert out == out.lower()
    assert max_length <= 0 or len(out) <= max_length
    assert out == normalize_name(name, prefix, max_length, strip), "deterministic"
