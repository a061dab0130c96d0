"""`export --format bundle -o DIR`: what boots a design with random weights and measures it.

DIR/config.json is the HF export (transformers loads it; the model it builds has exactly the
reported parameters; MTP draft layers named when the deployment speculates with MTP), with the
`quantization_config` of a checkpoint in the deployment's formats, so that the engines build
the quantized layers and fill them with random values (`--load-format dummy`); the serve
commands then name no `--quantization`: each engine reads the method from config.json. For
each engine the study allows: `serve_<engine>.sh` (one command per node and role), its config
files, and `bench_<engine>.sh`, the client command that reproduces the frontier point (ISL,
OSL, concurrency, requests). README.md says what each number should come out near.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cost_model import quantization_config_for
from search.atomic import write_text_atomic
from search.records.comparison import predicted_point
from search.records.engines import ENGINES, engine_document
from search.records.export import hf_document, make_folders, remove_folders, write_json
from search.study.space import Candidate
from search.study.spec import StudySpec

REQUESTS_PER_SLOT = 8  # requests per concurrent slot: the steady state outlasts ramp-up/down
MIN_REQUESTS = 64
def bundle_config(spec: StudySpec, cand: Candidate) -> dict:
    """The HF export with the `quantization_config` a checkpoint in the deployment's weight
    formats carries (`cost_model.hf.quantization_config_for`: block FP8 as DeepSeek-V3, MXFP4
    experts as gpt-oss, FP8/NVFP4 as ModelOpt, mixtures as compressed-tensors); the KV cache
    format is the serve command's flag, not the checkpoint's."""
    config = hf_document(spec, cand)
    dep = cand.deployment
    experts = dep.expert_precision if cand.arch.ffn.is_moe else None
    quantization = quantization_config_for(dep.precision, experts)
    if quantization is not None:
        config["quantization_config"] = quantization
    return config


def request_count(concurrency: int) -> int:
    return max(MIN_REQUESTS, REQUESTS_PER_SLOT * concurrency)


def bench_command(engine: str, model: str, isl: int, osl: int, concurrency: int) -> str:
    """The engine's own serving benchmark client at the point's ISL, OSL and concurrency."""
    n = request_count(concurrency)
    if engine == "vllm":
        words = ["vllm", "bench", "serve", "--backend", "vllm", "--model", model]
        extra = ["--ignore-eos", "--save-result", "--result-filename", "vllm_bench.json"]
    elif engine == "sglang":
        words = ["python", "-m", "sglang.bench_serving", "--backend", "sglang", "--model", model]
        extra = ["--random-range-ratio", "1", "--output-file", "sglang_bench.jsonl"]
    else:
        words = ["python", "-m", "tensorrt_llm.serve.scripts.benchmark_serving", "--model",
                 model, "--backend", "openai"]
        extra = ["--ignore-eos", "--save-result", "--result-filename", "trtllm_bench.json"]
    return shlex.join(words + ["--dataset-name", "random", "--random-input-len", str(isl),
                               "--random-output-len", str(osl), "--max-concurrency",
                               str(concurrency), "--num-prompts", str(n)] + extra)


def engines_of(spec: StudySpec) -> tuple[str, ...]:
    return ENGINES if spec.engine is None else (spec.engine,)


def _readme(spec, trial: int, cand: Candidate, point: dict, predictions: dict,
            notes: list[str], config: dict) -> str:
    w, c = spec.workload, point["concurrency"]
    lines = [f"# {cand.arch.name} (trial {trial} of `{spec.name}`)", "",
             f"Deployment {point['deployment']} on {cand.deployment.gpus}x {spec.hardware.gpu}; "
             f"ISL {w.isl_tokens}, OSL {w.osl_tokens}, concurrency {c} "
             f"({request_count(c)} requests). Weights are random (`--load-format dummy`): the "
             "speed is the design's, the text is noise.", "",
             "What the benchmark should come out near (the cost model's prediction):", "",
             "| engine | TPOT ms | TTFT ms (benchmark) | output tokens/s/GPU | tokens/s/user |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for engine, p in predictions.items():
        lines.append(f"| {engine} | {p['tpot_ms']:.4g} | {p['benchmark_ttft_ms']:.4g} | "
                     f"{p['tokens_per_s_per_gpu']:.4g} | {p['tokens_per_s_per_user']:.4g} |")
    lines += ["", f"config.json: `{config['model_type']}`; run `serve_<engine>.sh` (command i "
              "on node i), then `bench_<engine>.sh`; `archscout compare STUDY TRIAL RESULTS` "
              "puts the measurement beside the prediction.", ""]
    lines += [f"- {n}" for n in dict.fromkeys(notes)]
    return "\n".join(lines) + "\n"


def write_bundle(folder: Path, spec: StudySpec, trial: int, cand: Candidate, point: dict,
                 infeasible: list[str]) -> Path:
    """Write the bundle into `folder` (created with its missing parents; removed again if
    writing fails)."""
    created = make_folders(folder, folder)
    try:
        _write(folder, spec, trial, cand, point, infeasible)
    except BaseException:
        for path in folder.iterdir() if folder.exists() and created else ():
            path.unlink()
        remove_folders(created)
        raise
    return folder


def _write(folder, spec, trial, cand, point, infeasible) -> None:
    config = bundle_config(spec, cand)
    write_json(folder / "config.json", config)
    w, c = spec.workload, point["concurrency"]
    predictions, notes = {}, list(infeasible)
    for engine in engines_of(spec):
        doc = engine_document(engine, spec, cand, c, dummy=True)
        doc = {**doc, "model": str(folder.resolve())}
        model = str(folder.resolve())
        commands = [cmd.replace(f"/path/to/{cand.arch.name}", model)
                    for inst in doc["instances"] for cmd in inst["commands"]]
        write_text_atomic(folder / f"serve_{engine}.sh", "#!/bin/sh\n" + "\n".join(
            f"# node {i}\n{cmd}" for i, cmd in enumerate(commands)) + "\n")
        for name, text in doc["config_files"].items():
            write_text_atomic(folder / name, text)
        write_text_atomic(folder / f"bench_{engine}.sh", "#!/bin/sh\n" + bench_command(
            engine, model, w.isl_tokens, w.osl_tokens, c) + "\n")
        predictions[engine] = predicted_point(cand.arch, cand.deployment, spec.hardware.gpu,
                                              w.isl_tokens, w.osl_tokens, c, engine)
        notes += [f"{engine}: {n}" for n in doc["notes"]]
    write_text_atomic(folder / "README.md", _readme(spec, trial, cand, point, predictions,
                                                    notes, config))
