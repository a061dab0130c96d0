"""tests/benchmarks/serving/isl_mixes.py: the MLPerf datasets' input-length quantiles the
arrival model's M/G/1 queue reads, checked against the statistics tests/data/serving/SOURCES.md
§3 records (mean, median, max), and which rows carry them."""

import numpy as np
import pytest

from tests.benchmarks.serving.isl_mixes import DATASETS, isl_mix_frac, quantiles_tokens
from tests.benchmarks.serving.rows import _workload

# model -> (median, max) of the dataset's input tokens, tests/data/serving/SOURCES.md §3
PUBLISHED = {"Llama-2-70B": (152, 1021), "Llama-3.1-8B-Instruct": (784, 2540),
             "Llama-3.1-405B-Instruct": (10_112, 19_988), "Mixtral-8x7B-v0.1": (283, 1948),
             "DeepSeek-R1": (901.5, 3140)}


def test_quantiles_by_hand():
    """Lengths 1…100: the quantile at level ℓ sits at 1 + 99ℓ (linear): ℓ = 0.01 → 1.99 → 2,
    ℓ = 0.49 → 49.51 → 50, ℓ = 0.51 → 51.49 → 51, ℓ = 0.99 → 99.01 → 99."""
    q = quantiles_tokens(np.arange(1, 101))
    assert len(q) == 50
    assert (q[0], q[24], q[25], q[49]) == (2, 50, 51, 99)


@pytest.mark.parametrize("model", sorted(DATASETS))
def test_each_dataset_matches_its_published_statistics(model):
    """50 sorted quantiles whose mean is the dataset's mean within 0.3%, the middle two around
    the published median, the last (the 99th percentile) below the published max."""
    _, _, mean, quantiles = DATASETS[model]
    median, longest = PUBLISHED[model]
    assert len(quantiles) == 50 and list(quantiles) == sorted(quantiles)
    assert np.mean(quantiles) == pytest.approx(mean, rel=0.003)
    assert quantiles[24] <= median <= quantiles[25]
    assert quantiles[-1] < longest
    assert np.mean(isl_mix_frac(model)) == pytest.approx(1.0, abs=0.003)


def test_openorca_spread():
    """OpenOrca (Llama-2-70B): E[r²] 1.58 of the quantiles (1.595 over the 24,576 samples) and
    the 99th percentile 791/222.3 = 3.56 × the mean."""
    r = np.asarray(isl_mix_frac("Llama-2-70B"))
    assert np.mean(r * r) == pytest.approx(1.58, abs=0.01)
    assert r[-1] == pytest.approx(3.558, abs=0.001)


def test_only_mlperf_rows_carry_their_dataset_spread():
    row = {"model": "Llama-2-70B", "isl": "222", "osl": "250", "framework": "TensorRT-LLM",
           "source_kind": "mlperf_v5_1"}
    assert _workload(row).isl_mix_frac == isl_mix_frac("Llama-2-70B")
    assert _workload({**row, "source_kind": "trtllm_online_serving_v0_14"}).isl_mix_frac == ()
    assert _workload({**row, "model": "gpt-oss-120b"}).isl_mix_frac == ()
