"""Serving-engine exports: the commands and config files that stand a trial's deployment up on
vLLM, SGLang or TensorRT-LLM, node by node.

Every flag and value written here is one the engine defines at the version named in
`ENGINE_VERSIONS` (tests/data/engine_args/*.json, regenerated from the engines' own parsers by
tests/data/engine_args/regenerate.py; tests/search/records/test_engines.py checks each export
against them). What the engines infer from the checkpoint is not repeated as a flag: the number
format of a pre-quantized checkpoint comes from its `quantization_config` (block-scaled FP8 by
its `weight_block_size`, NVFP4 by ModelOpt's `quant_algo`), so block FP8 is never written as the
per-tensor `fp8` method.

The layout: an instance of tp·dp·pp·kvp GPUs is laid over nodes of `gpus_per_node` GPUs (4 on a
GB200/GB300 NVL72 compute tray, 8 on an HGX/DGX board), tensor parallelism innermost, so the
parallel dimension that spans nodes is DP when a TP·PP group fits one node, else TP or PP.
"""

from __future__ import annotations

import json
import math
import shlex

from constraints import engine_violations
from cost_model import DEFAULT_PREFILL_CHUNK_TOKENS, Architecture, Deployment, get_hardware
from search.study.space import Candidate
from search.study.spec import StudySpec

ENGINES = ("vllm", "sglang", "trtllm")
# the versions whose argument definitions the exports are checked against (tests/data/engine_args)
ENGINE_VERSIONS = {"vllm": "vllm 0.33.0", "sglang": "sglang 0.5.23",
                   "trtllm": "TensorRT-LLM source at fcd3f316 (llm_args.py) / 00209af1 (serve.py)"}
MODEL_PLACEHOLDER = "/path/to/{name}"  # the folder holding config.json (and the weights)
HEAD_ADDRESS = "HEAD_NODE_IP"  # the first node's address, to fill in
# GPUs per node: a GB200/GB300 NVL72 compute tray holds 2 Grace CPUs and 4 Blackwell GPUs
# (NVIDIA GB200 NVL72 product page: 18 compute trays, 72 GPUs); HGX/DGX boards hold 8.
GRACE_TRAY_GPUS, HGX_NODE_GPUS = 4, 8
MAX_SEQUENCES_CAP = 4096  # cost_model.deployment.DEFAULT_MAX_BATCH_SEQUENCES, per engine
VLLM_DP_RPC_PORT = 13345  # vLLM's documented example port for multi-node DP
SGLANG_DIST_PORT = 5000  # SGLang's documented multi-node example (`--dist-init-addr IP:5000`)

# HF config key holding the MTP draft layers, per exported model_type, as the engines read it
# (vLLM 0.33 vllm/config/speculative.py hf_config_override: deepseek_v3/v32, glm_moe_dsa,
# glm4_moe and qwen3_next read `num_nextn_predict_layers`, qwen3_5 `mtp_num_hidden_layers`)
MTP_DRAFT_KEYS = {"deepseek_v3": "num_nextn_predict_layers",
                  "deepseek_v32": "num_nextn_predict_layers",
                  "glm_moe_dsa": "num_nextn_predict_layers", "glm4_moe": "num_nextn_predict_layers",
                  "qwen3_next": "num_nextn_predict_layers",
                  "qwen3_5_text": "mtp_num_hidden_layers",
                  "qwen3_5_moe_text": "mtp_num_hidden_layers"}
MTP_DRAFT_LAYERS = 1  # one MTP module, reused for every draft token (DeepSeek-V3's)
# TensorRT-LLM's MTP decoding runs DeepSeek-V3's MTP modules (docs: speculative decoding, MTP)
TRTLLM_MTP_TYPES = frozenset({"deepseek_v3", "deepseek_v32"})

# `--quantization` of the linear layers' format (None: none written; the engine reads the
# checkpoint's quantization_config): vLLM QuantizationMethods / SGLang QUANTIZATION_CHOICES
QUANTIZATION = {"fp8": "fp8", "fp8_block": None, "nvfp4": "modelopt_fp4", "mxfp4": "mxfp4",
                "w4a16": None, "w8a16": None}
KV_CACHE_DTYPE = {"vllm": {"fp8": "fp8", "nvfp4": "nvfp4"},
                  "sglang": {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"},
                  "trtllm": {"fp8": "fp8", "nvfp4": "nvfp4"}}  # else the model's dtype: "auto"
QUANT_NOTES = {
    "fp8_block": "block-scaled FP8 (128x128 weight blocks) is read from the checkpoint's "
                 "quantization_config (`weight_block_size`); no per-tensor `fp8` method is "
                 "passed",
    "nvfp4": "NVFP4 needs a ModelOpt pre-quantized checkpoint (quant_algo NVFP4, "
             "hf_quant_config.json or quantization_config); BF16 weights are not quantized to "
             "NVFP4 at load time",
    "mxfp4": "MXFP4 experts are read from an MXFP4 checkpoint (gpt-oss layout)",
    "w4a16": "weight-only 4-bit needs a GPTQ/AWQ-style checkpoint; the engine picks its kernel "
             "from the checkpoint's quantization_config",
    "w8a16": "weight-only 8-bit needs a pre-quantized checkpoint; the engine picks its kernel "
             "from the checkpoint's quantization_config",
}


# ---- layout -------------------------------------------------------------------------------------


def gpus_per_node(hardware: str) -> int:
    """4 on a Grace-hosted NVL72 tray (GB200, GB300), else 8 (HGX/DGX)."""
    return GRACE_TRAY_GPUS if get_hardware(hardware).host_cpu == "grace" else HGX_NODE_GPUS


def layout(dep: Deployment, hardware: str, engine: str) -> dict:
    """Nodes of one instance, GPUs on each, and the parallel dimension that spans nodes."""
    per_node = gpus_per_node(hardware)
    gpus = dep.gpus
    nodes = math.ceil(gpus / per_node)
    group = dep.tp * dep.kvp  # GPUs of one attention TP group, innermost
    if nodes == 1:
        spans = None
    elif group > per_node:
        spans = "tp"
    elif dep.dp > 1 and group * dep.pp <= per_node:
        spans = "dp"
    else:
        spans = "pp" if dep.pp > 1 else "dp"
    return {"gpus": gpus, "nodes": nodes, "gpus_per_node": min(per_node, gpus),
            "spans_nodes": spans, "engine": engine}


# ---- what each engine needs from the model -----------------------------------------------------


def model_type(arch: Architecture) -> str:
    from cost_model import architecture_to_hf_config

    return architecture_to_hf_config(arch)["model_type"]


def mtp_supported(engine: str, arch: Architecture) -> bool:
    kind = model_type(arch)
    return kind in MTP_DRAFT_KEYS and (engine != "trtllm" or kind in TRTLLM_MTP_TYPES)


def spec_tokens(engine: str, arch: Architecture, dep: Deployment, notes: list[str]) -> int:
    """Draft tokens the export runs: the deployment's, when the exported HF config carries the
    draft layers the engine needs; else 0 with a note."""
    if dep.spec_tokens == 0:
        return 0
    if dep.spec_method != "mtp":
        notes.append(f"speculative decoding ({dep.spec_method}) dropped: it needs a separately "
                     "trained draft model; the predicted figures assume "
                     f"{dep.spec_tokens} draft token(s) per step")
        return 0
    if not mtp_supported(engine, arch):
        notes.append(f"MTP dropped: the exported `{model_type(arch)}` config has no draft layers "
                     f"{engine} runs; the predicted figures assume {dep.spec_tokens} MTP token(s)")
        return 0
    return dep.spec_tokens


def quantization_notes(dep: Deployment, arch: Architecture) -> list[str]:
    formats = [dep.precision] + ([dep.expert_precision] if arch.ffn.is_moe else [])
    return [QUANT_NOTES[f] for f in dict.fromkeys(formats) if f in QUANT_NOTES]


def quantization(dep: Deployment, arch: Architecture) -> str | None:
    """The engine's quantization method name of the lowest format (NVFP4 experts with FP8
    attention: ModelOpt's NVFP4 checkpoint, DeepSeek-R1-FP4's layout)."""
    formats = [dep.expert_precision] if arch.ffn.is_moe else []
    for fmt in (*formats, dep.precision):
        if fmt in ("nvfp4", "mxfp4"):
            return QUANTIZATION[fmt]
    return QUANTIZATION.get(dep.precision)


def kv_cache_dtype(engine: str, dep: Deployment) -> str:
    return KV_CACHE_DTYPE[engine].get(dep.kv_cache_precision, "auto")


def roles(dep: Deployment) -> list[str]:
    return ["prefill", "decode"] if dep.serving == "disaggregated" else ["aggregated"]


def command_line(words: list[str], args: dict) -> str:
    """`words` then `--flag value` for each set argument (True: a bare flag)."""
    out = list(words)
    for flag, value in args.items():
        if value is None or value is False:
            continue
        out += [flag] if value is True else [flag, str(value)]
    return shlex.join(out)


# ---- vLLM ---------------------------------------------------------------------------------------


def _vllm_args(spec: StudySpec, arch: Architecture, dep: Deployment, seqs: int, k: int,
               role: str, dummy: bool) -> dict:
    spec_config = None if k == 0 else json.dumps(
        {"method": "mtp", "num_speculative_tokens": k}, separators=(",", ":"))
    kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role)
    transfer = None if kv_role is None else json.dumps(
        {"kv_connector": "NixlConnector", "kv_role": kv_role}, separators=(",", ":"))
    return {"--tensor-parallel-size": dep.tp * dep.kvp,
            "--decode-context-parallel-size": dep.kvp if dep.kvp > 1 else None,
            "--pipeline-parallel-size": dep.pp,
            "--data-parallel-size": dep.dp if dep.dp > 1 else None,
            "--enable-expert-parallel": arch.ffn.is_moe and dep.ep > 1,
            "--quantization": None if dummy else quantization(dep, arch),
            "--kv-cache-dtype": kv_cache_dtype("vllm", dep),
            "--max-model-len": spec.workload.isl_tokens + spec.workload.osl_tokens,
            "--max-num-seqs": max(1, min(math.ceil(seqs / dep.dp), MAX_SEQUENCES_CAP)),
            "--max-num-batched-tokens": DEFAULT_PREFILL_CHUNK_TOKENS,
            "--speculative-config": spec_config, "--kv-transfer-config": transfer,
            "--load-format": "dummy" if dummy else None}


def _vllm_node_args(dep: Deployment, place: dict, rank: int) -> dict:
    """vLLM's multi-node flags: DP ranks spread over nodes (`--data-parallel-size-local`,
    `--headless` workers), or one TP/PP group over nodes (`--nnodes`, `--node-rank`)."""
    if place["nodes"] == 1:
        return {}
    if place["spans_nodes"] == "dp":
        local = place["gpus_per_node"] // (dep.tp * dep.kvp * dep.pp)
        return {"--data-parallel-size-local": local, "--data-parallel-address": HEAD_ADDRESS,
                "--data-parallel-rpc-port": VLLM_DP_RPC_PORT, "--headless": rank > 0,
                "--data-parallel-start-rank": rank * local if rank else None}
    return {"--nnodes": place["nodes"], "--node-rank": rank, "--master-addr": HEAD_ADDRESS}


def vllm_instances(spec, arch, dep, seqs, k, place, model, dummy) -> list[dict]:
    out = []
    for role in roles(dep):
        args = _vllm_args(spec, arch, dep, seqs, k, role, dummy)
        commands = [command_line(["vllm", "serve", model],
                                 {**args, **_vllm_node_args(dep, place, r)})
                    for r in range(place["nodes"])]
        out.append({"role": role, "commands": commands})
    return out


# ---- SGLang -------------------------------------------------------------------------------------


def _sglang_args(spec: StudySpec, arch: Architecture, dep: Deployment, seqs: int, k: int,
                 role: str, dummy: bool, model: str) -> dict:
    """SGLang's `--tp-size` is every GPU of a pipeline stage; attention DP splits it into
    `--dp-size` groups (`--enable-dp-attention`), MoE layers over `--ep-size`."""
    world = dep.tp * dep.dp * dep.kvp
    draft = {"--speculative-algorithm": "NEXTN", "--speculative-num-steps": k,
             "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": k + 1} if k else {}
    return {"--model-path": model, "--tp-size": world, "--pp-size": dep.pp,
            "--dp-size": dep.dp if dep.dp > 1 else None, "--enable-dp-attention": dep.dp > 1,
            "--ep-size": dep.ep if arch.ffn.is_moe and dep.ep > 1 else None,
            "--quantization": None if dummy else quantization(dep, arch),
            "--kv-cache-dtype": kv_cache_dtype("sglang", dep),
            "--context-length": spec.workload.isl_tokens + spec.workload.osl_tokens,
            "--max-running-requests": max(1, min(seqs, MAX_SEQUENCES_CAP * dep.dp)),
            "--chunked-prefill-size": DEFAULT_PREFILL_CHUNK_TOKENS, **draft,
            "--disaggregation-mode": role if role != "aggregated" else None,
            "--disaggregation-transfer-backend": "nixl" if role != "aggregated" else None,
            "--load-format": "dummy" if dummy else None}


def sglang_instances(spec, arch, dep, seqs, k, place, model, dummy) -> list[dict]:
    out = []
    for role in roles(dep):
        args = _sglang_args(spec, arch, dep, seqs, k, role, dummy, model)
        multi = place["nodes"] > 1
        commands = [command_line(["python", "-m", "sglang.launch_server"], {
            **args, "--nnodes": place["nodes"] if multi else None,
            "--node-rank": r if multi else None,
            "--dist-init-addr": f"{HEAD_ADDRESS}:{SGLANG_DIST_PORT}" if multi else None})
            for r in range(place["nodes"])]
        out.append({"role": role, "commands": commands})
    return out


# ---- TensorRT-LLM -------------------------------------------------------------------------------

TRTLLM_CONFIG_NAME = "extra_llm_api_options.yaml"


def trtllm_options(arch: Architecture, dep: Deployment, k: int, role: str, dummy: bool) -> dict:
    """The `--config` (`--extra_llm_api_options`) YAML: the fields trtllm-serve has no flag for."""
    world = dep.tp * dep.dp * dep.kvp
    options: dict = {"enable_attention_dp": dep.dp > 1,
                     "kv_cache_config": {"dtype": kv_cache_dtype("trtllm", dep)}}
    if arch.ffn.is_moe:
        options["moe_tensor_parallel_size"] = world // dep.ep
    if k:
        options["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": k}
    if role != "aggregated":
        options["cache_transceiver_config"] = {"backend": "NIXL"}
    if dummy:
        options["load_format"] = "dummy"
    return options


def yaml_text(options: dict, indent: int = 0) -> str:
    """A small YAML writer for nested dicts of scalars (what the options hold)."""
    lines = []
    for key, value in options.items():
        pad = " " * indent
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            lines.append(yaml_text(value, indent + 2))
        else:
            lines.append(f"{pad}{key}: {json.dumps(value)}")
    return "\n".join(lines)


def _trtllm_args(spec, arch, dep, seqs, model, config) -> dict:
    return {"--backend": "pytorch", "--tp_size": dep.tp * dep.dp * dep.kvp, "--pp_size": dep.pp,
            "--ep_size": dep.ep if arch.ffn.is_moe else None,
            "--max_batch_size": max(1, min(math.ceil(seqs / dep.dp), MAX_SEQUENCES_CAP)),
            "--max_num_tokens": DEFAULT_PREFILL_CHUNK_TOKENS,
            "--max_seq_len": spec.workload.isl_tokens + spec.workload.osl_tokens,
            "--config": config}


def trtllm_instances(spec, arch, dep, seqs, k, place, model, dummy) -> tuple[list, dict]:
    """One command per instance: across nodes, MPI starts every rank through
    trtllm-llmapi-launch (TensorRT-LLM docs, multi-node serving)."""
    out, files = [], {}
    for role in roles(dep):
        name = TRTLLM_CONFIG_NAME if role == "aggregated" else f"{role}_{TRTLLM_CONFIG_NAME}"
        files[name] = yaml_text(trtllm_options(arch, dep, k, role, dummy)) + "\n"
        serve = command_line(["trtllm-serve", model], _trtllm_args(spec, arch, dep, seqs, model,
                                                                   name))
        if place["nodes"] > 1:
            hosts = ",".join(f"node{r}:{place['gpus_per_node']}" for r in range(place["nodes"]))
            serve = f"mpirun -H {hosts} -n {place['gpus']} trtllm-llmapi-launch {serve}"
        out.append({"role": role, "commands": [serve]})
    return out, files


# ---- one document -------------------------------------------------------------------------------


def engine_notes(engine: str, arch: Architecture, dep: Deployment, place: dict) -> list[str]:
    notes = quantization_notes(dep, arch)
    if place["nodes"] > 1:
        notes.append(f"{place['nodes']} nodes of {place['gpus_per_node']} GPUs "
                     f"({place['spans_nodes'].upper()} spans nodes): run command i on node i; "
                     f"{HEAD_ADDRESS} is node 0's address")
    if dep.serving == "disaggregated":
        notes.append("disaggregated: one prefill and one decode instance shown; run them at the "
                     "xPyD ratio of the operating point (`show` names it) behind the engine's "
                     "disaggregation router; KV moves over NIXL")
    if dep.kvp > 1 and engine == "vllm":
        notes.append(f"Helix (kvp = {dep.kvp}) as vLLM decode context parallelism: attention TP "
                     f"over {dep.tp * dep.kvp} GPUs whose KV is split {dep.kvp} ways")
    if dep.kvp > 1 and engine == "trtllm":
        notes.append(f"Helix (kvp = {dep.kvp}) not written: its `cp_config` is outside the "
                     f"transcribed TensorRT-LLM definitions; attention runs TP over the same "
                     f"{dep.tp * dep.kvp} GPUs (add cp_config per TensorRT-LLM's Helix docs); "
                     "the predicted figures assume Helix")
    return notes + [f"not what {engine} runs: {m}" for m in engine_violations(engine, arch, dep)]


BUILDERS = {"vllm": vllm_instances, "sglang": sglang_instances}


def engine_document(engine: str, spec: StudySpec, cand: Candidate, sequences: int,
                    dummy: bool = False) -> dict:
    """The serve commands (one per node, per role) and config files of `cand` on `engine`,
    at most `sequences` concurrent requests per instance."""
    arch, dep = cand.arch, cand.deployment
    notes: list[str] = []
    k = spec_tokens(engine, arch, dep, notes)
    place = layout(dep, spec.hardware.gpu, engine)
    model = MODEL_PLACEHOLDER.format(name=arch.name)
    if engine == "trtllm":
        instances, files = trtllm_instances(spec, arch, dep, sequences, k, place, model, dummy)
    else:
        instances, files = BUILDERS[engine](spec, arch, dep, sequences, k, place, model,
                                            dummy), {}
    return {"engine": engine, "checked_against": ENGINE_VERSIONS[engine], "model": model,
            "layout": {k_: v for k_, v in place.items() if k_ != "engine"},
            "speculative_tokens": k, "instances": instances, "config_files": files,
            "notes": notes + engine_notes(engine, arch, dep, place)}
