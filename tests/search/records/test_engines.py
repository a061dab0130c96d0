"""Engine exports (search/records/engines.py): every flag and value inside the engine's own
definitions at the named version, the multi-node layout, MTP only with draft layers, the
format as each engine names it."""

import json
import shlex

import pytest

from cost_model.deployment import make_deployment
from cost_model.hf_config import load_architecture
from search.records.engines import ENGINES, engine_document, gpus_per_node, layout
from search.study.space import Candidate
from search.study.spec import load_spec
from tests.data_paths import MODEL_CONFIGS
from tests.search.records.engine_flags import command_problems, document_problems, table

SERVING_MODES = "studies/moe-serving-modes-gb300.toml"
# (model, study, deployment): a wide-EP MoE with attention DP over 16 GB300 trays, MTP, Helix,
# disaggregated; DeepSeek-V3 in block FP8 on 8 H200; a dense model on one GPU
CASES = {
    "dsv3-gb300-dp32-kvp2-mtp2-disagg": ("DeepSeek-V3.json", SERVING_MODES, dict(
        tp=1, dp=32, ep=32, kvp=2, spec_tokens=2, serving="disaggregated", precision="nvfp4",
        kv_precision="fp8")),
    "dsv3-h200-tp8-fp8-block": ("DeepSeek-V3.json", "studies/dense-8b-h200.toml", dict(
        tp=8, ep=8, precision="fp8_block")),
    "qwen3-moe-gb300-dp16-mtp": ("Qwen3-30B-A3B.json", SERVING_MODES, dict(
        tp=1, dp=16, ep=16, spec_tokens=2, precision="nvfp4")),
    "llama-h200-tp1": ("Llama-3.1-8B.json", "studies/quickstart.toml", dict(tp=1)),
    "llama-h200-tp16-pp2": ("Llama-3.1-8B.json", "studies/dense-8b-h200.toml", dict(tp=16, pp=2)),
}


def _candidate(case: str):
    model, study, dep = CASES[case]
    spec = load_spec(study)
    arch = load_architecture(MODEL_CONFIGS / model)
    return spec, Candidate({}, arch, make_deployment(**dep))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CASES)
def test_every_flag_and_value_is_the_engines_own(engine, case):
    """source: the engines' argument tables (vLLM 0.33.0 and SGLang 0.5.23 from their parsers,
    TensorRT-LLM transcribed at the named commits); tolerance: 0 unknown flags or values."""
    spec, cand = _candidate(case)
    doc = engine_document(engine, spec, cand, 256)
    assert document_problems(doc) == []
    assert doc["instances"] and all(inst["commands"] for inst in doc["instances"])


def test_the_checker_catches_a_flag_or_value_the_engine_does_not_define():
    assert command_problems("vllm", "vllm serve m --tensor-parallel-size 2") == []
    assert "--tp-degree is not a vllm flag" in command_problems("vllm",
                                                                "vllm serve m --tp-degree 2")
    assert command_problems("vllm", "vllm serve m --quantization fp8_block") != []
    assert command_problems("sglang", "python -m sglang.launch_server --tp-size two") != []
    assert command_problems("vllm", "vllm serve m --speculative-config "
                            "'{\"method\":\"nope\"}'") != []


def test_tables_name_their_version():
    assert table("vllm")["version"] == "0.33.0"
    assert table("sglang")["version"] == "0.5.23"
    assert set(table("trtllm")["commits"]) == {"tensorrt_llm/commands/serve.py",
                                               "tensorrt_llm/llmapi/llm_args.py"}


def test_gb300_trays_hold_four_gpus_and_dp_spans_the_nodes():
    """GB300 NVL72 compute trays: 4 GPUs each; tp1 x dp32 x kvp2 = 64 GPUs = 16 nodes, each
    node 2 DP ranks of TP 2 (tp·kvp) in vLLM."""
    spec, cand = _candidate("dsv3-gb300-dp32-kvp2-mtp2-disagg")
    assert gpus_per_node("gb300") == 4 and gpus_per_node("h200") == 8
    place = layout(cand.deployment, "gb300", "vllm")
    assert place == {"gpus": 64, "nodes": 16, "gpus_per_node": 4, "spans_nodes": "dp",
                     "engine": "vllm"}
    doc = engine_document("vllm", spec, cand, 512)
    decode = next(i for i in doc["instances"] if i["role"] == "decode")
    assert len(decode["commands"]) == 16
    head, third = (shlex.split(c) for c in (decode["commands"][0], decode["commands"][2]))
    assert head[head.index("--data-parallel-size-local") + 1] == "2"
    assert "--headless" not in head and "--headless" in third
    assert third[third.index("--data-parallel-start-rank") + 1] == "4"


def test_tp_beyond_a_node_uses_each_engines_multi_node_flags():
    spec, cand = _candidate("llama-h200-tp16-pp2")
    vllm = engine_document("vllm", spec, cand, 64)["instances"][0]["commands"]
    assert len(vllm) == 4 and "--nnodes 4 --node-rank 3" in vllm[3]
    sglang = engine_document("sglang", spec, cand, 64)["instances"][0]["commands"]
    assert "--nnodes 4 --node-rank 1 --dist-init-addr" in sglang[1]
    trt = engine_document("trtllm", spec, cand, 64)["instances"][0]["commands"]
    assert trt[0].startswith("mpirun -H node0:8,node1:8,node2:8,node3:8 -n 32 "
                             "trtllm-llmapi-launch trtllm-serve")


def test_mtp_only_where_the_exported_config_has_draft_layers():
    """DeepSeek-V3 exports as deepseek_v3 (num_nextn_predict_layers): MTP kept on every engine;
    Qwen3-30B-A3B exports as qwen3_moe, which has no draft layers: MTP dropped with a note."""
    spec, cand = _candidate("dsv3-gb300-dp32-kvp2-mtp2-disagg")
    for engine in ENGINES:
        assert engine_document(engine, spec, cand, 64)["speculative_tokens"] == 2
    spec, cand = _candidate("qwen3-moe-gb300-dp16-mtp")
    for engine in ENGINES:
        doc = engine_document(engine, spec, cand, 64)
        assert doc["speculative_tokens"] == 0
        assert any("MTP dropped" in n for n in doc["notes"])
        assert "speculative" not in json.dumps(doc["instances"]).lower()


def test_block_fp8_is_not_written_as_per_tensor_fp8_and_nvfp4_names_its_checkpoint():
    spec, cand = _candidate("dsv3-h200-tp8-fp8-block")
    for engine in ("vllm", "sglang"):
        doc = engine_document(engine, spec, cand, 64)
        assert "--quantization" not in doc["instances"][0]["commands"][0]
        assert any("weight_block_size" in n for n in doc["notes"])
    spec, cand = _candidate("qwen3-moe-gb300-dp16-mtp")
    doc = engine_document("vllm", spec, cand, 64)
    assert "--quantization modelopt_fp4" in doc["instances"][0]["commands"][0]
    assert any("ModelOpt pre-quantized checkpoint" in n for n in doc["notes"])


def test_disaggregated_roles_each_get_their_transfer_settings():
    spec, cand = _candidate("dsv3-gb300-dp32-kvp2-mtp2-disagg")
    vllm = engine_document("vllm", spec, cand, 64)
    roles = {i["role"]: i["commands"][0] for i in vllm["instances"]}
    assert set(roles) == {"prefill", "decode"}
    assert '"kv_role":"kv_producer"' in roles["prefill"]
    assert '"kv_role":"kv_consumer"' in roles["decode"]
    sglang = {i["role"]: i["commands"][0] for i in engine_document("sglang", spec, cand,
                                                                  64)["instances"]}
    assert "--disaggregation-mode decode" in sglang["decode"]
    trt = engine_document("trtllm", spec, cand, 64)
    assert "cache_transceiver_config" in trt["config_files"]["decode_extra_llm_api_options.yaml"]
