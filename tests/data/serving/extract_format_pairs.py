"""Rebuild format_pairs.csv: measured runs of one deployment in two number formats.

A pair is two groups of rows that differ only in one format field and agree on the model, GPU,
engine, parallelism (TP, EP, attention DP), ISL/OSL and concurrency:
- `precision` fp4 vs fp8: the SemiAnalysis InferenceX rows of ../serving_published.csv,
  published_ttft_tpot.csv and inferencex_runs.csv (DeepSeek-R1-0528 with NVIDIA's FP4
  checkpoint, NVFP4 experts, vs its native block FP8; inferencex_runs.csv names the engines
  `SGLang` / `TensorRT-LLM` where the others say `sglang` / `trt`: `ENGINE_NAMES`). Each side
  is the median over the GitHub Actions runs of that configuration (a configuration recurs
  across dates; the median keeps one run's outlier from deciding a pair); rows whose notes say
  SUSPECT are left out. TPOT is a mean or a median as each run's row says (inferencex_runs.csv:
  means).
- `kv_precision` fp8 vs bf16: vllm_blog_fp8_kv.csv (vLLM, H100, Llama-3.1-8B and gpt-oss-20b).
- `precision` fp8 vs fp16: trtllm_perf_overview_v0_14.csv, the offline trtllm-bench runs on H100
  of one model, TP and ISL/OSL as an FP8 engine (FP8 KV) and an FP16 one (FP16 KV): output
  tokens/s only; `kv_precision` stays empty so each side takes its engine's KV format (the
  deployment default: FP8 KV with FP8 weights, FP16 with FP16); `requests` is the run's.
- `precision` fp8 vs bf16: pair_sources/ml_energy_v3.csv (extract_ml_energy.py), the ML.ENERGY
  Leaderboard v3 runs of Qwen3-235B-A22B in block-FP8 and BF16 weights on one GPU type, GPU
  count and vLLM `max_num_seqs` (every request sent at once: an offline run whose batch cap is
  `max_num_seqs`, in `max_batch` and `concurrency`), KV BF16 on both sides; TPOT is the median
  ITL. The source states no input length and each side its own mean output length (in `source`):
  `isl` and `osl` stay empty, so the validator reports these pairs as skipped until a stated ISL
  is found.
`precision`, `moe_precision` and `scenario` are the pair's shared values where the other
field varies (empty where `precision` itself is the pair's field). The candidate format is
side `a` (fp4, fp8 KV), the baseline side `b` (fp8, bf16 KV); ratios are
a / b. Nothing is fitted to these pairs (validate_serving.py scores the model's ratios on them).

Usage: python tests/data/serving/extract_format_pairs.py OUT.csv
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import write_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
SOURCES = (HERE.parent / "serving_published.csv", HERE / "published_ttft_tpot.csv",
           HERE / "inferencex_runs.csv")
ENGINE_NAMES = {"SGLang": "sglang", "TensorRT-LLM": "trt"}  # inferencex_runs.csv -> the others
KV_SOURCE = HERE / "vllm_blog_fp8_kv.csv"
OVERVIEW_SOURCE = HERE / "trtllm_perf_overview_v0_14.csv"
ML_ENERGY_SOURCE = HERE / "pair_sources" / "ml_energy_v3.csv"
ML_ENERGY_MODELS = {"Qwen/Qwen3-235B-A22B-Instruct-2507": "Qwen3-235B-A22B",
                    "Qwen/Qwen3-235B-A22B-Thinking-2507": "Qwen3-235B-A22B"}  # same layers
KEY = ("model", "gpu", "framework", "tp", "ep", "attention_dp", "isl", "osl", "concurrency")
SIDE = ("tpot_ms", "ttft_ms", "output_tokens_per_s_per_gpu", "runs", "format")
COLUMNS = (*KEY, "field", "source_kind", "tpot_stat", "num_gpus", "precision", "moe_precision",
           "scenario", "requests", "kv_precision", "max_batch",
           *(f"{c}_{s}" for s in "ab" for c in SIDE), "source")


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _norm(value: str) -> str:
    """'4.0' and '4' alike."""
    try:
        number = float(value)
    except ValueError:
        return value.strip()
    return str(int(number)) if number.is_integer() else str(number)


def _median(rows: list[dict[str, str]], column: str) -> str:
    values = [float(r[column]) for r in rows if r.get(column, "").strip()]
    return f"{statistics.median(values):.4f}" if values else ""


def _side(rows: list[dict[str, str]], fmt: str) -> dict[str, str]:
    return {"tpot_ms": _median(rows, "tpot_ms"), "ttft_ms": _median(rows, "ttft_ms"),
            "output_tokens_per_s_per_gpu": _median(rows, "output_tokens_per_s_per_gpu"),
            "runs": str(len(rows)), "format": fmt}


def inferencex_pairs() -> list[dict[str, str]]:
    groups: dict[tuple, dict[str, list[dict[str, str]]]] = {}
    for path in SOURCES:
        for r in _read(path):
            if (r["source_kind"] != "inferencex" or r["mode"] not in ("", "agg")
                    or r["spec_decode"] not in ("", "none") or "SUSPECT" in r["notes"]
                    or r["precision"] not in ("fp4", "fp8")):
                continue
            key = tuple(_norm(ENGINE_NAMES.get(r[c], r[c]) if c == "framework" else r[c])
                        for c in KEY)
            groups.setdefault(key, {}).setdefault(r["precision"], []).append(r)
    out = []
    for key, by_format in sorted(groups.items()):
        if set(by_format) != {"fp4", "fp8"}:
            continue
        a, b = by_format["fp4"], by_format["fp8"]
        row = dict(zip(KEY, key), field="precision", source_kind="inferencex",
                   tpot_stat="mixed mean/median (per run, as its row says)",
                   num_gpus=_norm(a[0]["num_gpus"]),
                   source=f"medians over {len(a)} + {len(b)} InferenceX runs (rows of "
                          "serving_published.csv / published_ttft_tpot.csv / "
                          "inferencex_runs.csv)")
        row.update({f"{c}_a": v for c, v in _side(a, "fp4").items()})
        row.update({f"{c}_b": v for c, v in _side(b, "fp8").items()})
        out.append(row)
    return out


def kv_pairs() -> list[dict[str, str]]:
    rows = [r for r in _read(KV_SOURCE) if r["kv_precision"] in ("fp8", "bf16")]
    out = []
    for model in sorted({r["model"] for r in rows}):
        by_kv = {r["kv_precision"]: r for r in rows if r["model"] == model}
        first = by_kv["bf16"]
        row = {c: _norm(first[c]) for c in KEY}
        row.update(field="kv_precision", source_kind="vllm_blog", tpot_stat="median",
                   num_gpus=first["num_gpus"], precision=first["precision"],
                   moe_precision=first["moe_precision"], scenario=first["scenario"],
                   source=first["source_url"])
        row.update({f"{c}_a": v for c, v in _side([by_kv["fp8"]], "fp8").items()})
        row.update({f"{c}_b": v for c, v in _side([by_kv["bf16"]], "bf16").items()})
        out.append(row)
    return out


def perf_overview_pairs(path: Path = OVERVIEW_SOURCE) -> list[dict[str, str]]:
    """H100 FP8 vs FP16 engines of one model, TP and ISL/OSL (module docstring)."""
    groups: dict[tuple, dict[str, dict[str, str]]] = {}
    for r in _read(path):
        if r["gpu"] == "H100-SXM":
            key = tuple(_norm(r[c]) for c in KEY)
            groups.setdefault(key, {})[r["precision"]] = r
    out = []
    for key, by_format in sorted(groups.items()):
        if set(by_format) != {"fp8", "fp16"}:
            continue
        a, b = by_format["fp8"], by_format["fp16"]
        row = dict(zip(KEY, key), field="precision", source_kind=a["source_kind"], tpot_stat="",
                   num_gpus=a["num_gpus"], scenario=a["scenario"], requests=a["requests"],
                   source=a["source_url"])
        row.update({f"{c}_a": v for c, v in _side([a], "fp8").items()})
        row.update({f"{c}_b": v for c, v in _side([b], "fp16").items()})
        out.append(row)
    return out


# Qwen's `-FP8` checkpoints are block-scaled FP8: their config.json's quantization_config is
# {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
# (huggingface.co/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8), which vLLM runs as block FP8, not
# per-tensor `fp8`.
ML_ENERGY_FORMAT = {"fp8": "fp8_block", "bf16": "bf16"}


def _ml_energy_side(r: dict[str, str]) -> dict[str, str]:
    per_gpu = float(r["output_tokens_per_s"]) / int(r["num_gpus"])
    return {"tpot_ms": r["median_itl_ms"], "ttft_ms": "",
            "output_tokens_per_s_per_gpu": f"{per_gpu:.4f}", "runs": "1",
            "format": ML_ENERGY_FORMAT[r["precision"]]}


def ml_energy_pairs(path: Path = ML_ENERGY_SOURCE) -> list[dict[str, str]]:
    """FP8 vs BF16 weights of one model, task, GPU, GPU count and `max_num_seqs` (docstring)."""
    groups: dict[tuple, dict[str, dict[str, str]]] = {}
    for r in _read(path):
        base = r["model_id"].removesuffix("-FP8")
        key = (base, r["task"], r["gpu"], r["num_gpus"], r["tp"], r["ep"], r["max_num_seqs"])
        groups.setdefault(key, {})[r["precision"]] = r
    out = []
    for (base, task, gpu, gpus, tp, ep, seqs), by_format in sorted(
            groups.items(), key=lambda kv: (*kv[0][:3], int(kv[0][3]), int(kv[0][6]))):
        if set(by_format) != {"fp8", "bf16"}:
            continue
        a, b = by_format["fp8"], by_format["bf16"]
        out.append({"model": ML_ENERGY_MODELS[base], "gpu": gpu, "framework": a["engine"],
                    "tp": tp, "ep": ep, "attention_dp": "False", "isl": "", "osl": "",
                    "concurrency": seqs, "field": "precision", "source_kind": "ml_energy_v3",
                    "tpot_stat": "median ITL", "num_gpus": gpus, "scenario": "offline",
                    "kv_precision": "bf16", "max_batch": seqs,
                    **{f"{c}_a": v for c, v in _ml_energy_side(a).items()},
                    **{f"{c}_b": v for c, v in _ml_energy_side(b).items()},
                    "source": f"{base} ({task}), FP8 {a['model_id']} vs BF16; mean output "
                              f"tokens {float(a['avg_output_len']):.0f} (FP8) / "
                              f"{float(b['avg_output_len']):.0f} (BF16); no input length "
                              f"published; {a['source_url']} and {b['source_url']}"})
    return out


def main(argv: list[str]) -> int:
    rows = inferencex_pairs() + kv_pairs() + perf_overview_pairs() + ml_energy_pairs()
    write_rows(Path(argv[0]), rows, COLUMNS, "pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
