"""`archscout calibrate`: a fit recovers the known coefficients of a synthetic measured table,
tables are read and checked, the command writes loadable efficiency files, and measured times
reach `archscout gemm --json`. None of this needs the aiconfigurator-core package."""

import argparse
import json
import tomllib

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq
import pytest

import search.cli.main as cli
from cost_model.deployment import ENGINES
from cost_model.efficiency import efficiency_from_toml, get_efficiency
from search.calibration.errors import CalibrationError
from search.cli.errors import CommandError
from cost_model.hardware import catalog_names, get_hardware
from search.cli import calibrate as calibrate_command
from search.calibration.gemm import (
    FIGURE_4_FORMAT,
    MeasuredGemms,
    efficiency_of,
    figure_4_violation,
    fit_gemm,
    fit_hardware,
    measured_gemms,
    predicted_s,
    read_table,
)
from search.calibration.measured_lookup import measured_time_s

H200 = get_hardware("h200")
TRUTH = {  # TOML units; every term binds somewhere on the grid below
    "compute_ceiling_frac": 0.8, "bandwidth_ceiling_frac": 0.85, "n_half_dim": 100.0,
    "k_half_dim": 300.0, "overlap_frac": 0.6, "split_k_overhead_us": 3.0,
    "sm_bandwidth_gb_per_s": 80.0, "fixed_overhead_us": 2.0, "quantize_fixed_us": 4.0,
    "quantize_bandwidth_frac": 0.5, "quantize_per_row_ns": 5.0, "quantize_large_m_us": 10.0,
    "quantize_unaligned_m_us": 3.0, "quantize_unaligned_m_frac": 0.2,
    "quantize_unaligned_nk_us": 50.0,
}
# others: 5%; FP8's thin-tile term trades against the unaligned-M share (n_half 91 for 100)
RECOVERY_REL = {"sm_bandwidth_gb_per_s": 0.1, "overlap_frac": 0.1, "n_half_dim": 0.1,
                "quantize_per_row_ns": 0.1, "quantize_unaligned_m_us": 0.2,
                "quantize_unaligned_m_frac": 0.1}
NOISE_FRAC = 0.02  # log-normal measurement noise of the synthetic table


def _grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dims_m = [1, 8, 17, 64, 256, 1024, 4096, 16384]  # 1 and 17: M not a multiple of 4
    dims_nk = [96, 128, 512, 2048, 4096, 8192, 16384, 65536]  # 96: N or K off the 64/128 grid
    return tuple(np.array(x, dtype=float).ravel()
                 for x in np.meshgrid(dims_m, dims_nk, dims_nk, indexing="ij"))


def synthetic(fmt: str, seed: int = 1) -> tuple[MeasuredGemms, dict[str, float]]:
    """Times the model predicts with TRUTH on a shape grid, with 2% noise."""
    truth = {k: v for k, v in TRUTH.items() if fmt != "bf16" or not k.startswith("quantize")}
    m, n, k = _grid()
    blank = MeasuredGemms("h200", fmt, m, n, k, np.ones_like(m), "synthetic")
    time_s = predicted_s(blank, H200, efficiency_of(truth))
    noise = np.exp(np.random.default_rng(seed).normal(0.0, NOISE_FRAC, len(m)))
    return MeasuredGemms("h200", fmt, m, n, k, time_s * noise, "synthetic"), truth


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_fit_recovers_known_coefficients(fmt):
    data, truth = synthetic(fmt)
    pinned = {"fixed_overhead_us": truth["fixed_overhead_us"]} if fmt == "fp8" else {}
    result = fit_gemm(data, H200, pinned)
    for name, value in truth.items():
        assert result.coefficients[name] == pytest.approx(
            value, rel=RECOVERY_REL.get(name, 0.05)
        ), name
    assert result.median_abs_error_frac < 2 * NOISE_FRAC  # the noise, nothing more
    assert result.roofline_median_abs_error_frac > 5 * result.median_abs_error_frac


def test_fit_hardware_pins_the_bf16_kernel_overhead():
    tables = [synthetic("bf16")[0], synthetic("fp8")[0]]
    bf16, fp8 = fit_hardware(tables, H200)
    assert fp8.pinned == ("fixed_overhead_us",)
    assert fp8.coefficients["fixed_overhead_us"] == bf16.coefficients["fixed_overhead_us"]
    assert fp8.coefficients["quantize_fixed_us"] == pytest.approx(TRUTH["quantize_fixed_us"],
                                                                  rel=0.1)


def test_a_step_the_table_cannot_show_is_pinned_to_zero():
    """Every shape on the aligned side of the N/K step: its coefficient is 0, pinned, not fitted
    (search.calibration.gemm.unseen_steps); the steps the table shows stay fitted."""
    data, truth = synthetic("fp8")
    aligned = data.subset(np.flatnonzero((data.n % 64 == 0) & (data.k % 128 == 0)))
    result = fit_gemm(aligned, H200, {"fixed_overhead_us": truth["fixed_overhead_us"]})
    assert "quantize_unaligned_nk_us" in result.pinned
    assert result.coefficients["quantize_unaligned_nk_us"] == 0.0
    assert {"quantize_large_m_us", "quantize_unaligned_m_us"}.isdisjoint(result.pinned)


def _table(path, fmt_names=("bfloat16", "fp8"), drop=None):
    columns = {"gemm_dtype": [], "m": [], "n": [], "k": [], "latency": []}
    for name in fmt_names:
        data, _ = synthetic("fp8" if name == "fp8" else "bf16")  # other names: any times
        columns["gemm_dtype"] += [name] * len(data)
        for axis in "mnk":
            columns[axis] += getattr(data, axis).astype(int).tolist()
        columns["latency"] += (data.time_s * 1e3).tolist()  # ms, like aiconfigurator
    columns.pop(drop, None)
    table = pa.table(columns)
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        pa.csv.write_csv(table, path)
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_read_table_maps_formats_and_skips_others(tmp_path, suffix):
    path = _table(tmp_path / f"gemms{suffix}", ("bfloat16", "fp8", "int8_wo"))
    tables, skipped = measured_gemms(read_table(path), "h200", "test")
    assert [t.dtype for t in tables] == ["bf16", "fp8"] and skipped == ["int8_wo"]
    assert tables[0].time_s.max() < 1.0  # ms were converted to s


def test_read_table_names_missing_columns(tmp_path):
    path = _table(tmp_path / "gemms.parquet", drop="latency")
    with pytest.raises(CalibrationError, match="needs columns m, n, k, latency"):
        read_table(path)
    with pytest.raises(CalibrationError, match="does not exist"):
        read_table(tmp_path / "missing.parquet")


def _calibrate(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    calibrate_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["calibrate", *argv])
    return args.func(args)


def test_calibrate_command_writes_a_loadable_efficiency_file(tmp_path, capsys):
    """A user's table refits the GEMMs of one GPU in the `--engine` folder (default: the generic
    kernels); the file keeps the formats and sections it does not refit."""
    source = _table(tmp_path / "mine.parquet")
    out = tmp_path / "fitted"
    assert _calibrate(["--hardware", "h200", "--source", str(source), "--output", str(out),
                       "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {(f["hardware"], f["dtype"]) for f in doc["gemm"]} == {("h200", "bf16"), ("h200", "fp8")}
    assert doc["written"] == ["generic/h200.toml"]
    eff = efficiency_from_toml(tomllib.loads((out / "generic" / "h200.toml").read_text()))
    assert eff.version == "calibrated: measured table mine.parquet"
    assert eff.gemm["fp8"].compute_ceiling_frac == pytest.approx(0.8, rel=0.05)
    assert eff.gemm_fits["bf16"].median_abs_error_frac < 2 * NOISE_FRAC
    shipped = get_efficiency("h200")
    assert eff.gemm["fp8_block"] == shipped.gemm["fp8_block"]  # a format not refitted is kept
    assert eff.decode_attention_bandwidth_frac == shipped.decode_attention_bandwidth_frac
    assert not (out / "generic" / "gemm_points.toml").exists()  # only aiconfigurator's ship


def test_calibrate_from_a_file_needs_exactly_one_gpu(tmp_path):
    source = _table(tmp_path / "mine.csv")
    with pytest.raises(CommandError, match="exactly one GPU"):
        _calibrate(["--source", str(source), "--output", str(tmp_path)])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", [n for n in catalog_names() if n not in ("h100-sxm", "h200")])
def test_shipped_nvfp4_keeps_the_seeds_figure_4_shape(name, engine):
    eff = get_efficiency(name, engine).gemm[FIGURE_4_FORMAT]
    assert np.all(figure_4_violation(get_hardware(name), eff, margin=0.0) == 0.0)


def test_measured_time_of_a_shipped_shape():
    # aiconfigurator-core 0.12.0 gb300 gemm/trtllm/1.3.0rc20: nvfp4 M=1, N=K=8192: 20.32 µs;
    # gemm/vllm/0.24.0 (FlashInfer's CuTe-DSL kernel): 16.18 µs
    assert measured_time_s("trtllm", "gb300", "nvfp4", 1, 8192, 8192) == pytest.approx(
        20.32e-6, rel=1e-3)
    assert measured_time_s("vllm", "gb300", "nvfp4", 1, 8192, 8192) == pytest.approx(
        16.18e-6, rel=1e-3)
    assert measured_time_s("trtllm", "gb300", "nvfp4", 3, 1000, 1000) is None
    assert measured_time_s("trtllm", "my-gpu", "bf16", 1, 8192, 8192) is None


def test_gemm_json_has_the_measured_time(capsys):
    argv = ["gemm", "1", "8192", "8192", "--hardware", "gb300", "--dtype", "nvfp4", "--engine",
            "trtllm", "--json"]
    assert cli.main(argv) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["measured_us"] == pytest.approx(20.32, rel=1e-3) and row["kernels"] == "trtllm"
    assert cli.main([*argv, "--out-dtype", "fp8"]) == 0  # the tables write BF16 only
    assert json.loads(capsys.readouterr().out)["measured_us"] is None


def test_aiconfigurator_source_without_the_package_says_how_to_get_it(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CalibrationError, match="pip install aiconfigurator-core"):
        _calibrate(["--hardware", "h200"])


def test_non_positive_latency_names_the_column():
    table = pa.table({"gemm_dtype": ["bf16", "bf16"], "m": [1, 2], "n": [8, 8], "k": [8, 8],
                      "latency": [0.01, 0.0]})
    with pytest.raises(CalibrationError, match=r"`latency` must be a finite number > 0 in every "
                                               r"bf16 row"):
        measured_gemms(table, "h200", "mine.csv")
