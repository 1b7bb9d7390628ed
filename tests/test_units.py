"""course_lib.units: the course's one convention for accelerator memory (data-sheet GB of 10^9
bytes) and the accelerator table it reads from course_lib/accelerators.json."""
import json
from pathlib import Path

import pytest

from course_lib import units


def test_accelerator_memory_is_the_data_sheet_figure_in_gb():
    assert units.H100_SXM_BYTES == 80 * 10**9
    assert units.A100_SXM_80GB_BYTES == 80 * 10**9
    assert units.H200_SXM_BYTES == 141 * 10**9
    # the budget is below what the driver shows an H100 SXM (about 79.6 GiB)
    assert units.H100_SXM_BYTES < 79.6 * units.GiB


def test_table_matches_its_data_file():
    data = json.loads((Path(units.__file__).with_name("accelerators.json")).read_text())
    names = [n for n in data if not n.startswith("_")]
    assert list(units.ACCELERATORS) == names
    for name in names:
        a = units.accelerator(name)
        assert a.memory_bytes == data[name]["memory_gb"] * units.GB
        assert a.memory.startswith(f"{data[name]['memory_gb']} GB")
        assert a.bandwidth == pytest.approx(data[name]["bandwidth_tb_s"] * 1e12, rel=1e-12)
        assert a.peak_bf16 == pytest.approx(data[name]["peak_bf16_tflops"] * 1e12, rel=1e-12)


def test_unknown_accelerator_is_named():
    with pytest.raises(ValueError, match="unknown accelerator 'B300'.*H100 SXM 80GB"):
        units.accelerator("B300")


def test_parse_size_keeps_gb_and_gib_apart():
    assert units.parse_size("80GB") == 80 * 10**9
    assert units.parse_size("80 GiB") == 80 * 2**30
