"""`archscout hardware`, `gemm` and `evaluate` through `main(argv)`: the docs/DESIGN.md contract."""

import json
import subprocess
import sys

import pytest

from cost_model import ENGINES
from search.cli.main import main
from tests.conftest import MODEL_CONFIGS

LLAMA = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
GEMM_KEYS = {"math_us", "read_us", "write_us", "time_us", "quantize_us", "op_us", "bound",
             "intensity_flop_per_byte", "tile_efficiency", "wave_efficiency", "tflops"}
POINT_KEYS = {"concurrency", "tpot_ms", "ttft_ms", "tokens_per_s_per_user",
              "tokens_per_s_per_gpu", "fits_memory"}


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _bad(capsys, argv, *fragments):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err


def test_gemm_json_reproduces_table_2(capsys):
    """NVIDIA, AI Model Co-Design (2026), Table 2, M = 2048 row: math 1.15 µs, FP4 read 0.37 µs, FP8
    write 2.10 µs."""
    doc = _json(capsys, ["gemm", "2048", "8192", "512", "--hardware", "gb300", "--dtype", "nvfp4",
                         "--out-dtype", "fp8", "--json"])
    assert GEMM_KEYS <= doc.keys()
    assert doc["math_us"] == pytest.approx(1.15, abs=0.006)
    assert doc["read_us"] == pytest.approx(0.37, abs=0.006)
    assert doc["write_us"] == pytest.approx(2.10, abs=0.006)
    assert doc["roofline_bound"] == "memory"  # Table 2 caption: memory time exceeds math


def test_gemm_shapes_csv(capsys, tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,n,k,dtype\n1,4096,4096,fp8\n4096,4096,4096,\n8192,8192,8192,bf16\n")
    rows = _json(capsys, ["gemm", "--shapes", str(shapes), "--hardware", "h200", "--dtype",
                          "bf16", "--json"])
    assert [r["m"] for r in rows] == [1, 4096, 8192]
    assert [r["dtype"] for r in rows] == ["fp8", "bf16", "bf16"]
    assert all(GEMM_KEYS <= r.keys() for r in rows)
    assert rows[0]["quantize_us"] > 0 and rows[1]["quantize_us"] == 0
    assert all(r["op_us"] == pytest.approx(r["time_us"] + r["quantize_us"]) for r in rows)


def test_gemm_table_output(capsys):
    assert main(["gemm", "256", "8192", "512", "--hardware", "gb300", "--dtype", "nvfp4"]) == 0
    out = capsys.readouterr().out
    assert "time_us" in out and "memory" in out
    assert "quantize_us" in out and "op_us" in out


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp8_block", "nvfp4"])
def test_gemm_op_us_is_kernel_plus_quantization(capsys, dtype):
    """Issue 10: `op_us` = `time_us` + `quantize_us` (BF16 activations quantized to the input
    format, what measured quantized ops include); BF16 quantizes nothing."""
    doc = _json(capsys, ["gemm", "1", "8192", "8192", "--hardware", "b200", "--dtype", dtype,
                         "--json"])
    assert doc["op_us"] == pytest.approx(doc["time_us"] + doc["quantize_us"])
    assert (doc["quantize_us"] == 0) == (dtype == "bf16")


def test_gemm_op_us_compares_with_the_measured_op(capsys):
    """B200, M = 1, N = K = 8192: aiconfigurator-core 0.12.0 b200_sxm gemm/trtllm/1.3.0rc20
    measures the NVFP4 op at 22.25 µs and FP8 at 26.25 µs (quantization inside the timed op; the
    shipped grid, `measured_us`); `op_us` ranks them the same way and within the fit's 15%."""
    ops = {}
    for dtype in ("nvfp4", "fp8"):
        doc = _json(capsys, ["gemm", "1", "8192", "8192", "--hardware", "b200", "--dtype", dtype,
                             "--json"])
        assert doc["op_us"] == pytest.approx(doc["measured_us"], rel=0.15)
        ops[dtype] = doc["op_us"]
    assert ops["nvfp4"] < ops["fp8"]


@pytest.mark.parametrize("hardware", ["h100-sxm", "h200", "b200", "gb300"])
def test_gemm_bound_names_the_fixed_overhead(capsys, hardware):
    """Issue 10: M = 13, K = 64 is set by the kernel's fixed overhead, not by compute; a decode
    GEMM by memory; a large square one by compute."""
    def bound(m, n, k):
        return _json(capsys, ["gemm", m, n, k, "--hardware", hardware, "--json"])["bound"]
    assert bound("13", "4096", "64") == "overhead"
    assert bound("1", "8192", "8192") == "memory"
    assert bound("8192", "8192", "8192") == "compute"


def test_hardware_catalog(capsys):
    docs = _json(capsys, ["hardware", "--json"])
    assert {"h100-sxm", "h200", "b200", "gb200", "b300", "gb300"} <= {d["name"] for d in docs}
    one = _json(capsys, ["hardware", "gb300", "--json"])
    assert one["fp4_tflop_per_s"] == 15000 and one["sources"]
    assert one["host_cpu"] == "grace" and "Grace" in one["sources"]["system.host_cpu"]
    assert {d["name"]: d["host_cpu"] for d in docs}["b200"] == "x86"


def test_evaluate_at_one_concurrency(capsys):
    doc = _json(capsys, ["evaluate", LLAMA, "--hardware", "h200", "--tp", "8", "--precision",
                         "fp8", "--isl", "1024", "--osl", "1024", "--concurrency", "64", "--json"])
    assert doc["params"]["total"] == 8_030_261_248  # exact, model_params.csv
    assert doc["params"]["active"] == 8_030_261_248
    (point,) = doc["points"]
    assert POINT_KEYS <= point.keys() and point["concurrency"] == 64 and point["fits_memory"]
    assert point["tokens_per_s_per_user"] == pytest.approx(1000 / point["tpot_ms"])
    assert "frontier_area" not in doc


def test_evaluate_sweep_has_area_and_breakdown(capsys):
    doc = _json(capsys, ["evaluate", LLAMA, "--hardware", "h200", "--json"])
    assert doc["frontier_area"] > 0
    assert set(doc["breakdown"]) == {"latency_first", "throughput_first"}
    assert sum(doc["breakdown"]["latency_first"].values()) == pytest.approx(1.0)
    assert doc["points"][0]["concurrency"] == 1
    assert doc["points"][-1]["concurrency"] == doc["memory"]["max_concurrency"]


def test_evaluate_table_output(capsys):
    assert main(["evaluate", LLAMA, "--hardware", "b200", "--precision", "nvfp4"]) == 0
    out = capsys.readouterr().out
    assert "frontier area" in out and "tokens_per_s_per_gpu" in out
    assert "kernels: generic (no --engine" in out


@pytest.mark.parametrize("engine", ENGINES)
def test_evaluate_engine_selects_its_kernels(capsys, engine):
    """`evaluate --engine` prices every kernel on that engine's tables (not only its
    benchmark-TTFT terms): TPOT at one concurrency differs from the other engines'."""
    tpot = {}
    for e in ENGINES:
        doc = _json(capsys, ["evaluate", LLAMA, "--hardware", "h200", "--concurrency", "16",
                             "--engine", e, "--json"])
        assert doc["kernels"]["kernels"] == e
        tpot[e] = doc["points"][0]["tpot_ms"]
    assert all(tpot[engine] != tpot[e] for e in ENGINES if e != engine)


def test_evaluate_names_substituted_kernels(capsys):
    deepseek = str(MODEL_CONFIGS / "DeepSeek-V3.json")
    doc = _json(capsys, ["evaluate", deepseek, "--hardware", "b200", "--tp", "8", "--ep", "8",
                         "--precision", "fp8_block", "--moe-precision", "mxfp4", "--engine",
                         "trtllm", "--concurrency", "8", "--json"])
    assert doc["kernels"]["uncalibrated"] == []  # TensorRT-LLM measures MXFP4 experts
    doc = _json(capsys, ["evaluate", deepseek, "--hardware", "b200", "--tp", "8", "--ep", "8",
                         "--precision", "mxfp4", "--engine", "vllm", "--concurrency", "8",
                         "--json"])
    assert doc["kernels"]["uncalibrated"] == ["mxfp4 GEMMs: no vllm table, nvfp4's kernels"]


def test_model_that_does_not_fit_exits_1(capsys):
    deepseek = str(MODEL_CONFIGS / "DeepSeek-V3.json")
    assert main(["evaluate", deepseek, "--hardware", "h200"]) == 1
    assert "does not fit" in capsys.readouterr().err


def test_unknown_hardware_lists_known(capsys):
    _bad(capsys, ["gemm", "1", "2", "3", "--hardware", "tpu-v9"], "`hardware`", "h200", "gb300")


def test_tp_not_dividing_heads(capsys):
    _bad(capsys, ["evaluate", LLAMA, "--hardware", "h200", "--tp", "3"],
         "`tp` (3) must divide `num_attention_heads` (32)")


def test_unsupported_config_names_the_field(capsys, tmp_path):
    config = json.loads((MODEL_CONFIGS / "Llama-3.1-8B.json").read_text())
    config["model_type"] = "falcon"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    _bad(capsys, ["evaluate", str(path), "--hardware", "h200"], "falcon")


@pytest.mark.parametrize("argv, fragment", [
    (["gemm", "0", "8", "8", "--hardware", "h200"], "`M`"),
    (["gemm", "8", "8", "8", "--hardware", "h200", "--dtype", "int3"], "`dtype`"),
    (["gemm", "8", "8", "8", "--hardware", "h200", "--dtype", "nvfp4"], "h200"),
    (["evaluate", LLAMA, "--hardware", "h200", "--precision", "fp5"], "`precision`"),
    (["evaluate", LLAMA, "--hardware", "h200", "--isl", "0"], "`isl_tokens`"),
    (["evaluate", "/nonexistent/config.json", "--hardware", "h200"], "config.json"),
    (["evaluate", LLAMA], "--hardware"),
    (["frobnicate"], "frobnicate"),
], ids=["zero-m", "bad-dtype", "fp4-on-hopper", "bad-precision", "zero-isl", "missing-file",
        "missing-flag", "unknown-command"])
def test_bad_input_is_one_line_exit_2(capsys, argv, fragment):
    _bad(capsys, argv, fragment)


def test_bad_shapes_csv(capsys, tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text("m,n\n1,2\n")
    _bad(capsys, ["gemm", "--shapes", str(shapes), "--hardware", "h200"], "missing ['k']")
    shapes.write_text("m,n,k\n1,2,x\n")
    _bad(capsys, ["gemm", "--shapes", str(shapes), "--hardware", "h200"], "`k` on line `2`")


@pytest.mark.parametrize("body, fragments", [
    (b"m,n,k\n1,2,99999999999999999999\n", ("`k` on line `2`", "up to 2147483648",
                                            "99999999999999999999")),
    (b"m,n,k\n1,2\x00,3\n", ("`--shapes` line `2`", "NUL byte")),
    (b"m,n,k\n1,2," + b"9" * 100 + b"\n", ("`k` on line `2`", "at most 64 characters")),
    (b"m,n,k,dtype\n1,2,3," + b"f" * 100 + b"\n", ("`dtype` on line `2`", "at most 64")),
    (b"m,n,k\n1,2,\xff\n", ("not UTF-8 text",)),
    (b"m,n,k\n", ("has no rows",)),
    (b"m,n,k\n1,2,3\n\n" + b"x" * 200_000, ("line 4", "field larger than field limit")),
], ids=["past-int64", "nul", "over-long", "over-long-dtype", "binary", "empty",
        "past-csv-field-limit"])
def test_bad_shapes_fields_are_one_line(capsys, tmp_path, body, fragments):
    shapes = tmp_path / "s.csv"
    shapes.write_bytes(body)
    _bad(capsys, ["gemm", "--shapes", str(shapes), "--hardware", "h200"], *fragments)


def test_gemm_dims_past_int64_are_one_line(capsys):
    _bad(capsys, ["gemm", "1", "99999999999999999999999", "8", "--hardware", "h200"], "`N`",
         "up to 2147483648")


def test_gemm_says_which_kernels_priced_it(capsys):
    """Issue 23: `--engine` selects an engine's measured kernels; without one the generic
    kernels (per format the fastest engine's) are used and said; a format without a table of
    its own is priced with its rate class's and said (`uncalibrated:`)."""
    argv = ["gemm", "64", "4096", "4096", "--hardware", "b200", "--dtype", "nvfp4"]
    times = {}
    for engine in ENGINES:
        doc = _json(capsys, [*argv, "--engine", engine, "--json"])
        assert doc["kernels"] == engine
        times[engine] = doc["time_us"]
    assert len(set(times.values())) == 3  # each engine's own kernels
    generic = _json(capsys, [*argv, "--json"])
    assert generic["kernels"] in ENGINES and generic["time_us"] == times[generic["kernels"]]
    assert main(argv) == 0
    assert "kernels: generic (no --engine" in capsys.readouterr().out
    assert main(["gemm", "1", "8192", "8192", "--hardware", "b200", "--dtype", "mxfp4",
                 "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "kernels: vllm" in out
    assert "uncalibrated: mxfp4 GEMMs: no vllm table, nvfp4's kernels" in out


def test_nvfp4_is_priced_below_fp8_at_small_m_where_measured_faster(capsys):
    """Issue 23: `archscout gemm 1 8192 8192 --hardware b200 --dtype nvfp4` priced 16.8 µs vs
    FP8 15.0 µs while every engine's table measures the NVFP4 op faster (TensorRT-LLM 22.25 vs
    26.25 µs; vLLM 14.8 vs 33.4; SGLang 13.8 vs 18.8: aiconfigurator-core 0.12.0 b200_sxm
    gemm tables). The generic kernels (no engine) price the NVFP4 kernel and op below FP8's."""
    rows = {d: _json(capsys, ["gemm", "1", "8192", "8192", "--hardware", "b200", "--dtype", d,
                              "--json"]) for d in ("nvfp4", "fp8")}
    assert rows["nvfp4"]["time_us"] < rows["fp8"]["time_us"]
    assert rows["nvfp4"]["op_us"] < rows["fp8"]["op_us"]


def test_console_script_runs():
    """The installed entry point (pyproject [project.scripts]) answers like main()."""
    out = subprocess.run([sys.executable, "-m", "search.cli.main", "hardware"], capture_output=True,
                         text=True, check=True).stdout
    assert "gb300" in out


def test_the_batch_engine_column_selects_kernels(capsys, tmp_path):
    """`evaluate --batch`: rows differing only in `engine` are priced on their engines' kernels
    (a blank engine: the generic ones)."""
    rows = tmp_path / "rows.csv"
    rows.write_text("model,hardware,engine,concurrency\n" + "".join(
        f"{LLAMA},h200,{engine},16\n" for engine in ("", *ENGINES)))
    assert main(["evaluate", "--batch", str(rows), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    tpot = {r["engine"]: r["tpot_ms"] for r in records}
    assert len(set(tpot.values())) == 4, tpot


def test_a_studys_engine_selects_kernels():
    """A study's `engine` reaches the kernels its candidates are scored on."""
    from cost_model import Deployment
    from cost_model import load_architecture
    from search.study.evaluation import score_valid
    from search.study.space import Candidate
    from search.study.spec import load_spec

    spec = load_spec("studies/quickstart.toml")
    cand = Candidate({}, load_architecture(LLAMA), Deployment(precision="fp8"))
    scores = {engine: score_valid(spec.model_copy(update={"engine": engine}), [cand])
              for engine in (None, *ENGINES)}
    areas = {e: float(s.frontier_area[0]) for e, s in scores.items()}
    assert len(set(areas.values())) == 4, areas


def test_kernels_say_when_ep1_experts_run_the_joint_fused_moe_fit():
    """TensorRT-LLM's H100 table times W4A16 experts at EP = 1 in one configuration only (no
    `[moe.w4a16.ep1]`): an EP = 1 deployment's experts run the joint fit, and `uncalibrated`
    says so; H200's table has an EP = 1 entry, so nothing is said there; at EP > 1 never."""
    from cost_model import get_hardware
    from search.cli.cost import kernels_document

    line = ("w4a16 fused MoE at EP = 1: no trtllm EP = 1 rows, the joint w4a16 fit over "
            "every EP")
    h100, h200 = get_hardware("h100-sxm"), get_hardware("h200")
    assert line in kernels_document(h100, "trtllm", ["bf16"], "w4a16", ep1=True)["uncalibrated"]
    assert line not in kernels_document(h100, "trtllm", ["bf16"], "w4a16")["uncalibrated"]
    assert kernels_document(h200, "trtllm", ["bf16"], "w4a16", ep1=True)["uncalibrated"] == []
