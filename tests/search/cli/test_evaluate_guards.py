"""Bad HF configs and batch CSVs through the CLI, in-process (issue 29): each is one line on
stderr naming the field in backticks, the rule and the value, with exit code 2 — never a
traceback, a hang or a silently accepted value."""

import json
from pathlib import Path

import pytest

from search.cli.main import main
from search.errors import EXIT_BAD_INPUT

from tests.data_paths import HF_CONFIGS, MODEL_CONFIGS

LLAMA = json.loads((MODEL_CONFIGS / "Llama-3.1-8B.json").read_text())
QWEN_MOE = json.loads((MODEL_CONFIGS / "Qwen3-30B-A3B.json").read_text())
LLAMA_PATH = str(MODEL_CONFIGS / "Llama-3.1-8B.json")
COMMANDS = [["evaluate"], ["lint"]]


def _refused(capsys, argv: list[str], fragment: str) -> str:
    assert main(argv) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert fragment in err and "`" in err and "Traceback" not in err, err
    return err


def _config(tmp_path: Path, doc: dict | bytes) -> str:
    path = tmp_path / "config.json"
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return str(path)


CONFIG_CASES = [
    (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nests deeper than 32 levels"),
    ({**LLAMA, "num_hidden_layers": 10**9}, "`num_hidden_layers` (1000000000) must be at most"),
    ({**LLAMA, "num_hidden_layers": 10**12}, "`num_hidden_layers` (1000000000000) must be at"),
    ({**LLAMA, "intermediate_size": 10**15}, "`intermediate_size` (1000000000000000) must be"),
    ({**QWEN_MOE, "num_experts_per_tok": 1000}, "`experts_per_token` (1000) must be between 1 "
                                                "and `num_experts` (128)"),
    ({**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": {"x": {"y": 1}}}},
     "`rope_scaling.factor` ({'x': {'y': 1}}) must be a number"),
    (json.dumps(LLAMA).encode()[:40] + b"\x00" + json.dumps(LLAMA).encode()[40:],
     "holds a NUL byte at offset 40"),
    (json.dumps(LLAMA).encode()[:40] + b"\xfe\xff" + json.dumps(LLAMA).encode()[40:],
     "is not UTF-8 text: byte 0xfe at offset 40"),
    ({**LLAMA, "hidden_size": 2**64}, "`hidden_size` (18446744073709551616) must be at most"),
    ({**LLAMA, "num_hiden_layers": 32}, "(did you mean `num_hidden_layers`?)"),
    ({**LLAMA, "quantization_config": {"quant_method": "fp8", "modules_to_not_convert": 7}},
     "`quantization_config.modules_to_not_convert` (7) must be a list"),
]
CASE_IDS = ["deep-nesting", "layers-1e9", "layers-1e12", "huge-intermediate", "top-k-past-experts",
            "nested-rope", "nul-byte", "binary-bytes", "past-int64", "misspelt-key",
            "bad-quantization-config"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("doc", "fragment"), CONFIG_CASES, ids=CASE_IDS)
def test_bad_config_is_one_line_exit_2(tmp_path, capsys, command, doc, fragment):
    _refused(capsys, [*command, _config(tmp_path, doc), "--hardware", "h200"], fragment)


def test_assumed_defaults_are_said_once(capsys):
    """Llama 2 70B's config omits `attention_bias` and `mlp_bias`: one line names both, with the
    value assumed (text output; the JSON's `assumed_defaults`)."""
    path = str(HF_CONFIGS / "serving_Llama-2-70B.json")
    assert main(["evaluate", path, "--hardware", "h200", "--tp", "4", "--concurrency", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("assumed llama's config-class defaults") == 1
    assert "`attention_bias` = False, `mlp_bias` = False" in out
    assert main(["evaluate", path, "--hardware", "h200", "--tp", "4", "--concurrency", "1",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["assumed_defaults"] == {"attention_bias": False, "mlp_bias": False}


# ---- flags of evaluate ---------------------------------------------------------------------------


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--concurrency", str(2**70)], "`--concurrency` must be at most 4,194,304 requests"),
    (["--serving", "disaggregated", "--ttft-limit", "-5"],
     "`--ttft-limit`: must be a finite number > 0; got -5"),
    (["--serving", "disaggregated", "--ratio", "0", "1"],
     "`--ratio`: must be >= 1; got 0"),
], ids=["concurrency-past-int64", "negative-ttft-limit", "zero-ratio"])
def test_impossible_evaluate_flags_are_one_line(capsys, flags, fragment):
    _refused(capsys, ["evaluate", LLAMA_PATH, "--hardware", "h200", *flags], fragment)


# ---- batch CSVs ----------------------------------------------------------------------------------


def _batch(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "rows.csv"
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize(("content", "fragment"), [
    (b"model,hardware\n" + LLAMA_PATH.encode() + b"\x00,h200\n", "line 2 holds a NUL byte"),
    (b"model,hardware\n\xff\xfe\x01,h200\n", "line 2 is not UTF-8 text (byte 0xff)"),
    (b"model,hardware\n" + b"x" * 200_000 + b",h200\n",
     "line 2 is not CSV: field larger than field limit (131072)"),
    (b"model,hardware,precison\n" + LLAMA_PATH.encode() + b",h200,fp8\n",
     "column `precison` is not an input column (did you mean `precision`?)"),
], ids=["nul-byte", "binary", "over-long-field", "misspelt-column"])
def test_unreadable_batch_file_is_one_line_exit_2(tmp_path, capsys, content, fragment):
    _refused(capsys, ["evaluate", "--batch", _batch(tmp_path, content)], fragment)


@pytest.mark.parametrize(("row", "fragment"), [
    ("x" * 5000 + ",h200,1,1", "`model` ('xxxxxxxx"),
    (f"{LLAMA_PATH},h200,{2**70},1", "`tp` (1180591620717411303424)"),
    (f"{LLAMA_PATH},h200,1,{2**70}", "`concurrency` ('1180591620717411303424'): Input should be "
                                     "less than or equal to 4194304"),
    (f"{LLAMA_PATH},h200,1,zero", "`concurrency` ('zero'): Input should be a valid integer"),
], ids=["path-past-path-max", "tp-past-int64", "concurrency-past-int64", "concurrency-word"])
def test_bad_batch_row_names_its_line_and_field(tmp_path, capsys, row, fragment):
    """A bad row is skipped with its line (exit 2 when none is left): every stderr line is one
    line; the row's names the field and value (a long value cut to 60 characters)."""
    path = _batch(tmp_path, f"model,hardware,tp,concurrency\n{row}\n".encode())
    assert main(["evaluate", "--batch", path]) == EXIT_BAD_INPUT
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("archscout: line 2: ")
    assert fragment in lines[0] and len(lines[0]) < 300
    assert "no row could be evaluated" in lines[1]
