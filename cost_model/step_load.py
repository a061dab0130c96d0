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
