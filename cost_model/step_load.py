"""What one forward step of one pipeline stage carries, in whole requests.

With attention data parallelism the `dp` attention groups each hold their own requests (and
KV); a request is never split across groups, so with `c` sequences the busiest group holds
⌈c/dp⌉ of them (DP cannot speed up one request). A prefill chunk belongs to one request and so
to one group. The MoE layers are shared by all groups: their experts see every group's tokens.
Attention, dense FFN, shared experts, router, LM head, norms and the TP collectives run on the
busiest group's tokens (`group_*`); routed experts and the EP collectives on `instance_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_model.batch import DeployArrays

WHOLE_TOLERANCE = 1e-9  # relative: float64 rounding of a share times a count
SGLANG = "sglang"  # the engine whose DP-attention ranks split the prompt budget


def busiest_group_seqs(seqs, groups):
    """⌈seqs/groups⌉: whole sequences on the busiest of `groups` groups (0 stays 0)."""
    return np.ceil(np.divide(seqs, groups))


def _snap_whole(tokens):
    """Token counts within float rounding of a whole number become that number (k/n · n·ISL
    must not spill into the next GEMM tile)."""
    whole = np.round(tokens)
    return np.where(np.abs(tokens - whole) <= WHOLE_TOLERANCE * np.maximum(whole, 1.0), whole,
                    tokens)


@dataclass(frozen=True)
class StepLoad:
    """Tokens of one step; arrays broadcast against each other."""

    group_decode_seqs: np.ndarray  # decoding sequences of the busiest DP group (whole)
    group_prefill_tokens: np.ndarray  # prompt tokens that group prefills in the step
    group_prefill_seqs: np.ndarray  # the requests those prompt tokens belong to
    instance_tokens: np.ndarray  # decode + prompt tokens of all DP groups (what experts see)
    # tokens each decoding sequence puts through the model per step: 1, or k + 1 when k
    # speculative tokens are verified together
    decode_tokens_per_seq: np.ndarray | float = 1.0

    @property
    def group_decode_tokens(self) -> np.ndarray:
        return self.group_decode_seqs * self.decode_tokens_per_seq

    @property
    def group_tokens(self) -> np.ndarray:
        return self.group_decode_tokens + self.group_prefill_tokens

    @classmethod
    def of(cls, d: DeployArrays, decode_seqs, prefill_tokens, prefill_seqs=None,
           tokens_per_seq=1.0) -> StepLoad:
        """From instance-wide counts: `decode_seqs` whole decoding sequences (each putting
        `tokens_per_seq` tokens through the model) and `prefill_tokens` prompt tokens of
        `prefill_seqs` requests (None: one request, i.e. a chunk). The busiest group gets
        ⌈decode_seqs/dp⌉ sequences and ⌈prefill_seqs/dp⌉ of the prompts (a share below one
        request, an amortized average, stays on one group)."""
        decode_seqs = np.asarray(decode_seqs, dtype=np.float64)
        prefill_tokens = np.asarray(prefill_tokens, dtype=np.float64)
        seqs = np.minimum(prefill_tokens, 1.0) if prefill_seqs is None else \
            np.asarray(prefill_seqs, dtype=np.float64)
        group_seqs = np.minimum(busiest_group_seqs(seqs, d.dp), seqs)
        share = np.divide(group_seqs, seqs, out=np.zeros(np.broadcast(group_seqs, seqs).shape),
                          where=seqs > 0)
        return cls(group_decode_seqs=busiest_group_seqs(decode_seqs, d.dp),
                   group_prefill_tokens=_snap_whole(prefill_tokens * share),
                   group_prefill_seqs=group_seqs,
                   instance_tokens=decode_seqs * tokens_per_seq + prefill_tokens,
                   decode_tokens_per_seq=tokens_per_seq)

    @classmethod
    def single_group(cls, tokens, decode_seqs=None) -> StepLoad:
        """A step of `tokens` on one attention group (calibration tables, shape listings):
        every token is a decoding sequence unless `decode_seqs` says otherwise."""
        tokens = np.asarray(tokens, dtype=np.float64)
        decode = tokens if decode_seqs is None else np.asarray(decode_seqs, dtype=np.float64)
        prefill = tokens - decode
        return cls(group_decode_seqs=decode, group_prefill_tokens=prefill,
                   group_prefill_seqs=np.minimum(prefill, 1.0), instance_tokens=tokens)


def lockstep_groups(moe_layers, dp):
    """True where the attention-DP groups step together: their tokens meet in every MoE layer's
    expert exchange, so a group with nothing to run still joins each forward (vLLM's "dummy"
    passes, docs.vllm.ai Data Parallel Deployment; TensorRT-LLM's attention-DP padding
    requests; SGLang's idle batches). A dense model's DP groups share no layer: they are
    independent replicas (vLLM runs its DP engine-core synchronization for MoE models only)."""
    return (np.asarray(moe_layers) > 0) & (np.asarray(dp) > 1)


def rank_chunk_tokens(budget_tokens, dp, lockstep, engine: str | None):
    """The prompt-token budget of one attention-DP rank's step: the engine's configured budget
    (TensorRT-LLM `max_num_tokens` and vLLM `max_num_batched_tokens` are per rank), except that
    SGLang with DP attention divides `--chunked-prefill-size` by the DP size
    (python/sglang/srt/server_args.py, `_handle_data_parallelism`: `chunked_prefill_size //
    dp_size`, "to avoid MoE kernel issues")."""
    budget = np.asarray(budget_tokens, dtype=np.float64)
    divided = np.floor(budget / np.asarray(dp, dtype=np.float64))
    return np.where(lockstep & (engine == SGLANG), divided, budget)



@dataclass(frozen=True)
class PromptSchedule:
    """How the prompt tokens of aggregated serving spread over the steps of one micro-batch.

    Every request prefills its `new` prompt tokens once per `decode_steps` steps, so the
    busiest group must absorb p_g = n_g · new / decode_steps prompt tokens per step (n_g its
    whole sequences) and the micro-batch P = m · new / decode_steps (m its sequences). The
    engine runs them in chunks of at most the rank's budget (`rank_chunk_tokens`), a prompt
    in ⌈new/budget⌉ equal chunks. A group carries a chunk in a share ρ = min(p_g/chunk, 1) of
    its steps (fractional occupancy: the average of the engine's schedule); past ρ = 1 every
    step carries p_g. Independent groups (one group here) prefill in a share s = ρ of the steps.
    Groups in lockstep (`lockstep_groups`) wait for each other: a step carries prompts when any
    of the g groups holding requests does, s = 1 − (1 − ρ)^g for independent arrivals, or s = ρ
    when a balancer holds new requests until every group has one (they prefill together:
    TensorRT-LLM `attention_dp_config.enable_balance`, SGLang `--enable-prefill-delayer`). Such a
    step carries the busiest group's chunk and, over all groups, P/s prompt tokens on average
    (so that s · P/s = P: no prompt token is lost or counted twice). Every quantity is
    continuous in p_g: one more request never makes a step change of more than its own share."""

    chunk_tokens: np.ndarray  # one chunk of a prompt
    group_tokens_per_step: np.ndarray  # p_g
    instance_tokens_per_step: np.ndarray  # P (the group's own for independent groups)
    prompt_step_frac: np.ndarray  # s

    @property
    def group_step_tokens(self) -> np.ndarray:
        """Prompt tokens of the busiest group in a step that carries prompts: max(p_g, chunk)."""
        return np.maximum(self.group_tokens_per_step, self.chunk_tokens)

    @property
    def group_step_requests(self) -> np.ndarray:
        """The prompts those tokens belong to: one per chunk (at least one)."""
        return np.maximum(self.group_step_tokens / self.chunk_tokens, 1.0)

    @property
    def instance_step_tokens(self) -> np.ndarray:
        """Prompt tokens of all groups in such a step: P/s, never below the busiest group's."""
        per_step = np.divide(self.instance_tokens_per_step, self.prompt_step_frac,
                             out=np.zeros(np.broadcast(self.instance_tokens_per_step,
                                                       self.prompt_step_frac).shape),
                             where=self.prompt_step_frac > 0)
        return np.maximum(per_step, self.group_step_tokens)

    @property
    def step_units(self) -> np.ndarray:
        """k = P/s over the busiest group's step tokens (≥ 1): how many groups' chunks a step
        that carries prompts holds on average. Steps hold whole chunks, ⌊k⌋ or ⌈k⌉ of them
        (`low_step_tokens`, `high_step_tokens`), ⌈k⌉ in a share k − ⌊k⌋ of them
        (`high_step_frac`): a step's time is not linear in its tokens (GEMM tiles), so the
        average step is the mix of the two, never one step of k chunks."""
        return np.maximum(self.instance_step_tokens / self.group_step_tokens, 1.0)

    @property
    def low_step_tokens(self) -> np.ndarray:
        return np.floor(self.step_units) * self.group_step_tokens

    @property
    def high_step_tokens(self) -> np.ndarray:
        return np.ceil(self.step_units) * self.group_step_tokens

    @property
    def high_step_frac(self) -> np.ndarray:
        return self.step_units - np.floor(self.step_units)

    @classmethod
    def of(cls, group_seqs, instance_seqs, groups, new_tokens, decode_steps, chunk_tokens,
           balanced) -> PromptSchedule:
        """`group_seqs` n_g and `instance_seqs` m of a micro-batch over `groups` g prefilling
        groups (1 for independent ones), prompts of `new_tokens` prefilled once per
        `decode_steps` steps in chunks of at most `chunk_tokens`; `balanced`: g groups
        prefill in the same steps."""
        chunk = new_tokens / np.ceil(new_tokens / chunk_tokens)
        group = np.asarray(group_seqs, dtype=np.float64) * new_tokens / decode_steps
        rho = np.minimum(group / chunk, 1.0)
        share = np.where(balanced, rho, 1.0 - (1.0 - rho) ** groups)
        return cls(chunk_tokens=chunk + np.zeros_like(group), group_tokens_per_step=group,
                   instance_tokens_per_step=np.asarray(instance_seqs, dtype=np.float64)
                   * new_tokens / decode_steps, prompt_step_frac=share)
