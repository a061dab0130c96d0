"""Mutation testing of the core formulas (cost model, loss proxy, constraints): does the suite
notice a one-line change?

Each mutation replaces one exact snippet of one file (a formula's factor, a dropped term, a
ceiling removed). For each, a private copy of the repository (never the working tree: other
processes may be editing it) gets that one change and runs the fast part of the suite
(tests/cost_model tests/constraints tests/objectives, stopping at the first failure); the mutant
is *killed* when the run fails. Tests that already fail without a mutation are left out of every
run and listed. A mutation whose snippet is not in the revision scored is
reported as not applicable (so an older revision can be scored with the same list).

Usage: python tests/benchmarks/mutation_score.py [--rev REV] [--only SUBSTRING]
  --only S    only the mutations whose file or description contains S (e.g. `objectives/`)
  --rev REV   score a git revision instead of the working tree (e.g. 2e381df, before the
              formula tests were added)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = ["tests/cost_model", "tests/constraints", "tests/objectives"]


@dataclass(frozen=True)
class Mutation:
    path: str
    original: str | tuple[str, ...]  # the snippet, or its spellings across revisions
    mutated: str | tuple[str, ...]  # the replacement of each spelling
    what: str

    def pairs(self) -> list[tuple[str, str]]:
        originals = (self.original,) if isinstance(self.original, str) else self.original
        mutated = (self.mutated,) if isinstance(self.mutated, str) else self.mutated
        return list(zip(originals, mutated))


MUTATIONS = (
    Mutation("cost_model/serving_steps.py",
             ("decode.total_s / (2.0 * d.pp)", "step.total_s / (2.0 * d.pp)"),
             ("decode.total_s / (4.0 * d.pp)", "step.total_s / (4.0 * d.pp)"),
             "TTFT: a quarter instead of half a step of waiting"),
    Mutation("cost_model/step.py", "STEP_OVERHEAD_KERNELS * env.hw.kernel_launch_s / d.pp",
             "STEP_OVERHEAD_KERNELS * env.hw.kernel_launch_s",
             "step overhead not shared by stages"),
    Mutation("cost_model/step.py", "STEP_OVERHEAD_KERNELS = 8", "STEP_OVERHEAD_KERNELS = 4",
             "step-overhead kernel count"),
    Mutation("cost_model/step.py", "tp_reduce = all_reduce_s(tok * a.hidden * ACTIVATION_BYTES",
             "tp_reduce = all_reduce_s(tok * a.hidden * 1.0", "TP all-reduce message in 1 byte"),
    Mutation("cost_model/step.py", ("attention = layers * tp_reduce",
                                    "attention = layers * (tp_reduce + "),
             ("attention = 0.0 * tp_reduce", "attention = layers * (0.0 * tp_reduce + "),
             "no all-reduce after attention"),
    Mutation("cost_model/step.py", ("routed * env.linear.activation_bytes_per_value",
                                    "routed * env.experts.activation_bytes_per_value"),
             ("routed * ACTIVATION_BYTES",) * 2, "dispatch in BF16 instead of the experts' format"),
    Mutation("cost_model/serving_steps.py", "(chunks + d.pp - 1.0) *", "(chunks + d.pp) *",
             "pipeline fill of TTFT"),
    Mutation("cost_model/serving_steps.py",
             "groups = np.where(lockstep, np.minimum(d.dp, np.maximum(micro, 1.0)), 1.0)",
             "groups = np.where(lockstep, d.dp, 1.0)", "empty DP groups carry chunks"),
    Mutation("cost_model/serving_steps.py",
             "np.maximum(np.floor(np.asarray(budget_tokens",
             "np.maximum(np.ceil(np.asarray(budget_tokens",
             "the step budget keeps one request more decoding than fits"),
    Mutation("cost_model/serving_steps.py",
             "lifetime = np.maximum(np.asarray(ttft_s) + (osl_tokens - 1.0) * tpot,",
             "lifetime = np.maximum((osl_tokens - 1.0) * tpot,",
             "the budget wait leaves a decoding request's TTFT out of its lifetime"),
    Mutation("cost_model/disaggregated.py",
             "per_instance = in_flight * ratio.decode_instances / ratio.prefill_instances",
             "per_instance = in_flight / ratio.prefill_instances",
             "a prefill pool's wave ignores how many decode instances feed it"),
    Mutation("cost_model/step.py", ("ELEMENTWISE_HIDDEN_PASSES = 12.0",
                                    "SUB_BLOCK_HIDDEN_PASSES = 5.0"),
             ("ELEMENTWISE_HIDDEN_PASSES = 6.0", "SUB_BLOCK_HIDDEN_PASSES = 2.5"),
             "elementwise traffic"),
    Mutation("cost_model/step.py", ("OTHER_KERNELS_PER_LAYER = 4",
                                    "NORM_KERNELS_PER_SUB_BLOCK = 1"),
             ("OTHER_KERNELS_PER_LAYER = 2", "NORM_KERNELS_PER_SUB_BLOCK = 0"),
             "non-GEMM kernels per layer"),
    Mutation("cost_model/step.py", "return self.mixer + self.dense + self.moe",
             "return 2.0 * self.layers",
             "a transformer layer's two sub-blocks on each single-mixer layer (Nemotron-H)"),
    Mutation("cost_model/step.py", "crosses_domain=stages_span_domains(d, hw)",
             "crosses_domain=False", "pipeline sends always on NVLink"),
    Mutation("cost_model/step_load.py",
             "return (np.asarray(moe_layers) > 0) & (np.asarray(dp) > 1)",
             "return np.asarray(dp) > 1", "dense DP groups step in lockstep"),
    Mutation("cost_model/step_load.py",
             "return np.where(lockstep & (engine == SGLANG), divided, budget)",
             "return budget + 0.0 * divided", "SGLang's DP ranks keep the whole prompt budget"),
    Mutation("cost_model/evaluate.py",
             "share = np.where(alone, fuller * n_hi / in_flight, 1.0)",
             "share = np.where(alone, 1.0, 1.0)", "every DP replica as full as the busiest"),
    Mutation("cost_model/evaluate.py", "slot = slot_wait_s(c, in_flight, requests_per_s)",
             "slot = 0.0 * slot_wait_s(c, in_flight, requests_per_s)",
             "no wait for a slot past the engine's cap"),
    Mutation("cost_model/benchmark_ttft.py",
             "return max(self.mean_queue_share_frac, self.queue_share_frac)",
             "return self.mean_queue_share_frac", "a mean share below the median's"),
    Mutation("cost_model/attention.py", "out=np.zeros(np.shape(total)),\n"
             "                     where=a.attention_layers > 0)", "out=None)",
             "0/0 attention time without attention layers"),
    Mutation("cost_model/step_load.py", "return np.ceil(np.divide(seqs, groups))",
             "return np.divide(seqs, groups)", "fractional requests per DP group"),
    Mutation("cost_model/memory.py", "RESERVED_MEMORY_FRAC = 0.10", "RESERVED_MEMORY_FRAC = 0.05",
             "reserved memory share"),
    Mutation("cost_model/memory.py", "np.where(d.pp > 1, 1.0, 2.0 - a.tied)",
             "np.where(d.pp > 1, 1.0, 2.0)", "tied embeddings stored twice"),
    Mutation("cost_model/memory.py", "np.maximum(np.floor(free / per_seq), 0.0) * d.dp",
             "np.maximum(np.floor(free / per_seq), 0.0)", "max concurrency of one DP group only"),
    Mutation("cost_model/memory.py", "WORKSPACE_HIDDEN_MULTIPLE = 8.0",
             "WORKSPACE_HIDDEN_MULTIPLE = 4.0", "activation workspace"),
    Mutation("cost_model/memory.py",
             ("router = share * a.ffn.moe_layers * a.ffn.experts * a.hidden",
                                      "        if row.layers in layers:\n"),
             ("router = 0.0 * a.hidden",
              '        if row.layers in layers and row.name != "moe/router":\n'),
             "router weights forgotten"),
    Mutation("cost_model/memory.py", ("layers = dict(attention=a.attention_layers, linear=",
                                      "layers = column_layer_counts(a, a.attention_layers, "),
             ("layers = dict(attention=a.layers, linear=",
              "layers = column_layer_counts(a, a.layers, "),
             "attention weights on every layer (hybrids)"),
    Mutation("cost_model/memory.py",
             "a.attention_layers, a.mixer.linear_layers, a.ffn.dense_layers,",
             "a.attention_layers, 0.0 * a.mixer.linear_layers, a.ffn.dense_layers,",
             "linear-mixer weights forgotten"),
    Mutation("cost_model/sharded_gemms.py",
             "return _ceil(heads / getattr(dep, row.shard)) * rest",
             "return heads / getattr(dep, row.shard) * rest", "KV heads not replicated beyond TP"),
    Mutation("cost_model/sharded_gemms.py",
             'return read(src, "num_experts") / dep.ep if row.experts else 1',
             'return read(src, "num_experts") if row.experts else 1', "experts not split over EP"),
    Mutation("cost_model/sharded_gemms.py", 'param_key="moe/router", precision="high"',
             'param_key="moe/router", precision="linear"', "router in the linear format"),
    Mutation("cost_model/sharded_gemms.py",
             'sharded="n",\n                       when="gated_mlp", **common)',
             'sharded="n",\n                       **common)', "FFN gate on non-gated MLPs"),
    Mutation("cost_model/sharded_gemms.py", "kv_heads=True, bias=\"qkv_bias\", **gqa),\n"
             '        WeightGemm("attention/v_proj"', "bias=\"qkv_bias\", **gqa),\n"
             '        WeightGemm("attention/v_proj"', "k_proj sharded like q (no KV-head floor)"),
    Mutation("cost_model/layers.py", "n, k = (k, n) if row.decode_transposed else (n, k)",
             "n, k = (n, k)", "MLA's absorbed W_UK not transposed"),
    Mutation("cost_model/evaluate.py", ("throughput = c * osl /", "requests_per_s * osl /"),
             ("throughput = c * (osl - 1.0) /", "requests_per_s * (osl - 1.0) /"),
             "throughput counts OSL − 1 tokens"),
    Mutation("cost_model/evaluate.py", "return np.maximum(ttft_s + (osl_tokens - 1.0) * tpot_s, "
             "osl_tokens * tpot_s)", "return ttft_s + (osl_tokens - 1.0) * tpot_s",
             "lifetime without work conservation"),
    Mutation("cost_model/layers.py", "np.minimum(load.group_prefill_tokens,\n"
             "                                                 load.group_prefill_seqs)",
             "load.group_prefill_tokens", "LM head on every prompt token"),
    Mutation("cost_model/layers.py", "return np.where(d.ep > 1, d.imbalance, 0.0)",
             "return d.imbalance", "imbalance charged at EP = 1"),
    Mutation("cost_model/layers.py", "return 1.0 - miss ** np.maximum(tokens, 0.0)",
             "return 1.0 - miss ** np.maximum(tokens / 2.0, 0.0)", "touched experts"),
    Mutation("cost_model/layers.py", "* top_k / np.maximum(experts, 1.0)",
             "* top_k / np.maximum(2.0 * experts, 1.0)", "tokens per expert C·k/E"),
    Mutation("cost_model/layers.py",
             "return m_expert, busiest_rank_touched_experts(touched, a.ffn.experts, d.ep, "
             "d.random_routing)",
             "return m_expert, a.ffn.experts / d.ep * touched",
             "busiest EP GPU reads the mean number of experts"),
    Mutation("cost_model/layers.py", "np.minimum(mean + expected_largest_z(ep) * spread, n)",
             "np.minimum(mean + 2.0 * expected_largest_z(ep) * spread, n)",
             "busiest EP GPU two z above the mean"),
    Mutation("cost_model/layers.py", "np.sqrt(np.maximum(mean * (1.0 - touched_frac), 0.0))",
             "np.sqrt(np.maximum(mean, 0.0))", "binomial spread without (1 − p)"),
    Mutation("cost_model/order_statistics.py", "BLOM_OFFSET = 0.375", "BLOM_OFFSET = 0.5",
             "Blom's plotting position"),
    Mutation("cost_model/batch.py", "return cls(hw=hw, eff=get_efficiency(hw.name, engine), "
             "linear=linear, kv=kv,", "return cls(hw=hw, eff=get_efficiency(hw.name), "
             "linear=linear, kv=kv,", "a step's engine does not select its kernels"),
    Mutation("cost_model/layers.py",
             "terms.fixed_overhead_s + local_copies * per_local_s + scanned_s",
             "terms.fixed_overhead_s + local_copies * per_local_s",
             "fused MoE without the scan of every routed index"),
    Mutation("cost_model/layers.py", "scanned_s = tokens * a.ffn.top_k * terms.per_scanned_copy_s",
             "scanned_s = local_copies * terms.per_scanned_copy_s",
             "fused MoE scans only its local copies"),
    Mutation("cost_model/gemm.py",
             "return replace(rates, grouped_bandwidth_ceiling_frac=eff.bandwidth_ceiling_frac)",
             "return rates", "expert GEMMs stream at the dense grouped ceiling"),
    Mutation("cost_model/efficiency.py",
             '"sm_bandwidth_bytes_per_s": moe.sm_bandwidth_bytes_per_s})', '})',
             "expert GEMMs keep the dense per-SM stream rate"),
    Mutation("cost_model/efficiency.py",
             "return self.moe_ep1.get(name, self.moe[name]) if ep1 else self.moe[name]",
             "return self.moe[name]", "EP = 1 deployments ignore the `ep1` fused-MoE entry"),
    Mutation("cost_model/moe_ep.py", "return np.where(single, ep1_value, joint_value)",
             "return joint_value", "a mixed-EP batch prices EP = 1 overheads on the joint entry"),
    Mutation("cost_model/moe_ep.py", "return GemmRates.select(single, ep1, joint)",
             "return joint", "a mixed-EP batch runs EP = 1 expert GEMMs on the joint entry"),
    Mutation("cost_model/layers.py", "g.expert_ep = d.ep", "g.expert_ep = None",
             "expert GEMMs never see the deployment's EP degree"),
    Mutation("cost_model/step.py", "moe_overhead_s(a, d, env, load.instance_tokens)",
             "moe_overhead_s(a, d, env, load.group_tokens)",
             "fused MoE on the busiest group's tokens only (attention DP)"),
    Mutation("cost_model/step_load.py", ("return np.where(balanced, per_group,",
                                          "share = np.where(balanced, rho, "),
             ("return np.where(False, per_group,", "share = np.where(False, rho, "),
             "balanced groups prefill in separate steps"),
    Mutation("cost_model/serving_steps.py",
             ('part["prompt_high"].minus(part["prompt"]), plan.high_step_frac)',
              "steps.schedule.high_step_frac)"),
             ('part["prompt_high"].minus(part["prompt"]), 0.0 * plan.high_step_frac)',
              "0.0 * steps.schedule.high_step_frac)"),
             "prompt steps hold the lower whole number of chunks only"),
    Mutation("cost_model/step_load.py", "return np.maximum(per_step, self.group_step_tokens)",
             "return self.group_step_tokens + 0.0 * per_step",
             "a prompt step carries the busiest group's chunk only"),
    Mutation("cost_model/communication.py",
             ("inside = 2.0 * (local - 1.0) / local * message_bytes",
              "_ring_s(message_bytes, group_gpus, hw, eff, 2.0, alpha)"),
             ("inside = (local - 1.0) / local * message_bytes",
              "_ring_s(message_bytes, group_gpus, hw, eff, 1.0, alpha)"),
             "all-reduce volume 2(n−1)/n"),
    Mutation("cost_model/communication.py",
             "_ring_s(total_bytes, group_gpus, hw, eff, 1.0, hw.scale_up_latency_s)",
             "_ring_s(total_bytes, group_gpus, hw, eff, 0.5, hw.scale_up_latency_s)",
             "all-gather volume (n−1)/n"),
    Mutation("cost_model/communication.py", "inside = (local - 1.0) / local * send_bytes / up",
             "inside = send_bytes / up", "all-to-all volume (n−1)/n"),
    Mutation("cost_model/communication.py", ("latency = alpha + 2.0 * _tree_steps(domains)",
                                             "latency = alpha + passes * _tree_steps(domains)"),
             ("latency = alpha + 1.0 * _tree_steps(domains)",
              "latency = alpha + 1.0 * _tree_steps(domains)"), "all-reduce tree hops"),
    Mutation("cost_model/step.py",
             "return np.where(uses_moe_all_to_all(a, d, hw), exchange, gather)",
             "return exchange", "attention-DP MoE exchange as an all-to-all everywhere"),
    Mutation("cost_model/step.py", "(d.ep > a.ffn.top_k)", "(d.ep >= a.ffn.top_k)",
             "MNNVL all-to-all also at EP = top-k"),
    Mutation("cost_model/step.py", "host_step_s(load.group_decode_seqs + load.group_prefill_seqs",
             "host_step_s(load.group_decode_seqs", "host time forgets the prefill requests"),
    Mutation("cost_model/step.py", ("+ scheduler + moe_layers", "+ scheduler + stage.moe"),
             ("+ scheduler / d.pp + moe_layers", "+ scheduler / d.pp + stage.moe"),
             "host time divided by the PP stages"),
    Mutation("cost_model/step.py", "0.0, 0.0,\n                         host=False)",
             "0.0, 0.0,\n                         host=True)", "draft passes pay the host again"),
    Mutation("cost_model/host.py", "return request_step_s(host_cpu) * np.asarray(sequences",
             "return request_step_s(host_cpu) * 0.5 * np.asarray(sequences",
             "host time per sequence halved"),
    Mutation("cost_model/attention.py",
             "np.where(att.mla > 0, att.kv_lora + att.rope_dim, 2.0 * heads",
             "np.where(att.mla > 0, att.kv_lora + att.rope_dim, 1.0 * heads", "KV = K + V"),
    Mutation("cost_model/attention.py",
             "np.where(att.mla > 0, att.kv_lora + att.rope_dim, 2.0 * heads",
             "np.where(att.mla > 0, att.kv_lora, 2.0 * heads", "MLA cache without its RoPE part"),
    Mutation("cost_model/attention.py", ("gqa = 4.0 * a.attention.head_dim", "gqa = 4.0 * width"),
             ("gqa = 2.0 * a.attention.head_dim", "gqa = 2.0 * width"), "attention FLOPs per key"),
    Mutation("cost_model/units.py", "return FLOP_PER_MAC * np.multiply(",
             "return 1.0 * np.multiply(", "1 MAC = 2 FLOP"),
    Mutation("cost_model/benchmark_ttft.py", ("+ terms.queue_share_frac * queue_s",
                                              "+ terms.queue_share(statistic) * queue_s"),
             ("+ queue_s",) * 2,
             "benchmark TTFT queue share"),
    # the accuracy proxy (objectives/): each pinned by a hand-derived golden test of predict_loss
    Mutation("objectives/accuracy_model.py", "p.active * gain**p.moe_share", "p.active * gain",
             "MoE gain on every layer (without ** moe_layer_frac)"),
    Mutation("objectives/accuracy_model.py",
             "counted = cap.clamp(cap.TAO_VOCAB_RANGE[1] / shape.vocab_size, (0.0, 1.0))",
             "counted = 1.0", "embeddings counted past the 96K vocabulary"),
    Mutation("objectives/accuracy_model.py",
             "ratio = cap.clamp(shape.mlp_attention_ratio, terms.MIX_RATIO_RANGE)",
             "ratio = shape.mlp_attention_ratio", "MLP/attention ratio not clamped to Bian's fit"),
    Mutation("objectives/accuracy_model.py", "terms.BIAN_TASK3.factor(cap.REFERENCE_MIX_RATIO)",
             "terms.BIAN_TASK3.factor(terms.BIAN_TASK3.b2 / terms.BIAN_TASK3.b1)",
             "mix term normalized at r* instead of the reference shape"),
    Mutation("objectives/accuracy_model.py",
             "has_global_layer=shape.sliding_layers < shape.num_layers - shape.linear_layers",
             "has_global_layer=True", "every sliding design read as having a global layer"),
    # the constraints (constraints/): each pinned by a test of the check's value at its boundary
    Mutation("constraints/budget.py", "    if value <= 0:\n        return Violation(\"memory_fit\"",
             "    if value < 0:\n        return Violation(\"memory_fit\"",
             "memory fit refuses exactly one sequence (<= → <)"),
    Mutation("constraints/budget.py", 'Violation("params_budget", worst - tolerance,',
             'Violation("params_budget", worst,', "params budget without its tolerance"),
    Mutation("constraints/budget.py", "distances = [(low - ratio) / low]",
             "distances = [(low - ratio) / ratio]", "aspect-ratio distance relative to the ratio"),
    Mutation("constraints/budget.py", "value = float(dep.gpus - max_gpus)",
             "value = float(dep.tp * dep.pp - max_gpus)", "GPU count without DP"),
    Mutation("constraints/sharding.py", "    return (padded - size) / padded",
             "    return (padded - size) / size", "padding waste relative to the unpadded dim"),
    Mutation("constraints/sharding.py", "copies = math.ceil(n_kv / tp) * tp / n_kv",
             "copies = tp / n_kv", "KV copies without the ceiling"),
    Mutation("constraints/sharding.py", "if arch.ffn.is_moe and arch.num_moe_layers % pp:",
             "if arch.ffn.is_moe and arch.num_layers % pp:", "PP split ignores the dense layers"),
    Mutation("constraints/sharding.py", "groups_replicated = kind == MAMBA2_MIXER and groups == 1",
             "groups_replicated = groups == 1", "one key head replicated for every linear kind"),
    Mutation("constraints/sharding.py",
             ("reductions = [dim for dim in gemm_dims(arch, dep) if dim.reduction]",
              "[dim for dim in gemm_dims(arch, dep) if dim.reduction]"),
             ("reductions = list(gemm_dims(arch, dep))", "list(gemm_dims(arch, dep))"),
             "block scaling checked on every dim, not only K"),
    Mutation("cost_model/frontier.py", ("((xj > xi) | (yj > yi))", "front = (ys > larger_x) & "),
             ("((xj > xi) & (yj > yi))", "front = (ys >= larger_x) & "),
             "Pareto dominance needs both axes strictly better (ties never dominated) [issue 27]"),
    Mutation("cost_model/step.py", "point_to_point_s(tok * a.hidden * ACTIVATION_BYTES, hw, eff,",
             "point_to_point_s(0.0 * tok * a.hidden * ACTIVATION_BYTES, hw, eff,",
             "pipeline activation send of 0 bytes [issue 27]"),
    Mutation("cost_model/memory.py", "share = np.ceil(a.layers / d.pp) / a.layers",
             "share = 1.0 / d.pp", "weights per GPU: 1/PP of the layers, not ⌈L/PP⌉/L [issue 27]"),
    Mutation("cost_model/evaluate.py",
             ("np.minimum(memory_limit, workload.max_batch_sequences * d.dp)",
              "np.minimum(memory_seqs, workload.max_batch_sequences * d.dp)"),
             ("np.minimum(memory_limit, workload.max_batch_sequences)",
              "np.minimum(memory_seqs, workload.max_batch_sequences)"),
             "engine batch cap without × dp [issue 27]"),
    Mutation("cost_model/evaluate.py",
             ("(c <= memory_limit) & (memory_limit >= 1)",
              "fits = (c <= limits.memory_seqs)"),
             ("(c < memory_limit) & (memory_limit >= 1)",
              "fits = (c < limits.memory_seqs)"),
             "the memory limit itself does not fit (<= → <) [issue 27]"),
)


def _tree(rev: str | None, into: Path) -> None:
    """The working tree (tracked and untracked, not ignored) or a revision, copied to `into`.
    Revisions from before the tests were self-contained read a sibling `shared/` folder: the
    copy gets a link to the checkout's sibling when there is one."""
    sibling = REPO.parent / "shared"
    if sibling.is_dir():
        (into.parent / "shared").symlink_to(sibling)
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
        return
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, files):
        src, dst = REPO / name.decode(), into / name.decode()
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _pytest(root: Path, *extra: str, first: str = "") -> subprocess.CompletedProcess:
    """The fast suite, the tests of package `first` (the mutated one) run first: the same tests
    either way, but a mutant the package's own tests kill stops `-x` sooner."""
    tests = sorted(TESTS, key=lambda folder: folder != f"tests/{first}")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rf", *extra, *tests], cwd=root, capture_output=True, text=True)


def _baseline_failures(root: Path) -> list[str] | None:
    """Tests that fail without any mutation: left out of every mutant's run (and reported);
    None when the suite cannot even be collected (no score is possible)."""
    run = _pytest(root)
    if any(line.startswith("ERROR ") for line in run.stdout.splitlines()) or \
            run.returncode not in (0, 1):
        print(run.stdout[-2000:])
        return None
    return [line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")]


def _tests_naming(root: Path, path: str) -> list[str]:
    """The fast suite's test files that name the mutated module (`cost_model/step.py` → the
    word `step` after an import of its package): run before the whole fast suite, since a
    mutant they kill is killed by the suite too (they are part of it)."""
    module = Path(path).stem
    package = path.split("/")[0]
    pattern = re.compile(rf"\b{package}(\.|/){module}\b|from {package} import .*\b{module}\b")
    return sorted(str(test.relative_to(root)) for folder in TESTS
                  for test in (root / folder).rglob("test_*.py")
                  if pattern.search(test.read_text()))


def _suite_fails(root: Path, deselect: list[str], path: str) -> bool:
    """True when the fast suite fails on the mutant: first the test files naming the mutated
    module (a few seconds), then, only if they all pass, the whole fast suite."""
    flags = [f"--deselect={test}" for test in deselect]
    own = _tests_naming(root, path)
    no_tests_collected = 5  # pytest's exit code when every selected test was deselected
    if own and subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-x", *flags, *own], cwd=root,
                              capture_output=True).returncode not in (0, no_tests_collected):
        return True
    return _pytest(root, "-x", *flags, first=path.split("/")[0]).returncode != 0


def score(rev: str | None, only: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        _tree(rev, root)
        broken = _baseline_failures(root)
        if broken is None:
            print("the unmutated suite does not run here: no score")
            return 2
        for test in broken:
            print(f"  (fails unmutated, left out: {test})")
        killed = applicable = 0
        chosen = [m for m in MUTATIONS if not only or only in m.path + m.what]
        for m in chosen:
            path = root / m.path
            text = path.read_text() if path.exists() else ""
            found = [(a, b) for a, b in m.pairs() if text.count(a) == 1]
            if not found:
                print(f"  n/a       {m.path}: {m.what}")
                continue
            applicable += 1
            path.write_text(text.replace(*found[0]))
            start = time.monotonic()
            dead = _suite_fails(root, broken, m.path)
            path.write_text(text)
            killed += dead
            print(f"  {'killed' if dead else 'SURVIVED':8}  {m.path}: {m.what} "
                  f"({time.monotonic() - start:.0f} s)")
        print(f"{killed} of {applicable} applicable mutations killed "
              f"({killed / max(applicable, 1):.0%}); {len(chosen) - applicable} not applicable, "
              f"{len(MUTATIONS) - len(chosen)} not selected")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=None, help="git revision to score (default: work tree)")
    parser.add_argument("--only", default=None, help="mutations whose file or text contains this")
    args = parser.parse_args(argv)
    return score(args.rev, args.only)


if __name__ == "__main__":
    sys.exit(main())
