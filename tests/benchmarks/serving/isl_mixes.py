"""The spread of input lengths of the MLPerf Inference datasets, for the arrival model's M/G/1
prompt queue and its own-prefill spread (`cost_model.arrival_queue`, `Workload.isl_mix_frac`).

Each dataset's 50 quantiles of the per-sample input token counts at levels (k + ½)/50,
k = 0…49 (`numpy.quantile`, linear, rounded to tokens): equally likely request lengths, the last
one the 99th percentile. Counted from the official dataset files as published by
`openshift-psap/performance-dashboard` (`mlperf-data/summaries/<benchmark>.csv`, column
`input_length`, at `71007029fb5bced1d79808e7e64dc4c2af82ea55`, Apache-2.0; the same files whose
means the MLPerf rows' ISL is, tests/data/serving/SOURCES.md §3). Statistics of the inputs
only: nothing here is fitted to a measured TTFT or TPOT. `python -m
tests.benchmarks.serving.isl_mixes LENGTHS_GIT_DIR` recounts them from a snapshot.

What the summaries give beyond the mean, median and max the rows' notes carry: a lognormal from
mean and median (σ² = 2 ln(mean/median)) does not exist for DeepSeek-R1 and Llama-3.1-405B
(median above mean: 902 vs 803.8, 10,112 vs 9,428.6) and overstates OpenOrca's E[r²] (2.14
against the counted 1.60) and p99 (4.6× the mean at the truncation, against 3.57×).
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import numpy as np

LENGTHS_COMMIT = "71007029fb5bced1d79808e7e64dc4c2af82ea55"
LEVELS = (np.arange(50) + 0.5) / 50
# model (as the rows name it) -> (summary file, samples, mean input tokens, the 50 quantiles)
DATASETS = {
    "Llama-2-70B": ("llama2-70b-99", 24_576, 222.3, (
        56, 67, 73, 79, 83, 87, 91, 94, 97, 101, 104, 106, 109, 112, 115, 118, 121, 124, 127,
        130, 133, 137, 141, 145, 150, 155, 160, 167, 174, 182, 190, 199, 207, 216, 227, 238,
        252, 266, 283, 301, 324, 355, 390, 436, 492, 541, 581, 614, 652, 791)),
    "Llama-3.1-8B-Instruct": ("llama3-1-8b-datacenter", 13_368, 870.7, (
        237, 294, 327, 355, 381, 402, 425, 446, 468, 488, 506, 525, 544, 564, 583, 603, 621,
        641, 659, 678, 696, 715, 734, 753, 773, 793, 815, 837, 860, 886, 908, 934, 960, 984,
        1012, 1042, 1071, 1109, 1146, 1184, 1226, 1272, 1324, 1383, 1444, 1529, 1627, 1750,
        1891, 2118)),
    "Llama-3.1-405B-Instruct": ("llama3-1-405b", 8_313, 9428.6, (
        1598, 2345, 2783, 3140, 3503, 3812, 4109, 4366, 4678, 4973, 5295, 5659, 5996, 6359,
        6798, 7210, 7566, 7964, 8275, 8625, 8955, 9223, 9479, 9807, 9901, 10151, 10433, 10477,
        10754, 10956, 11059, 11111, 11373, 11639, 11689, 11955, 12048, 12281, 12391, 12606,
        12886, 13046, 13366, 13596, 14047, 14404, 14967, 15831, 17185, 18956)),
    "Mixtral-8x7B-v0.1": ("mixtral-8x7b", 15_000, 427.4, (
        54, 73, 85, 96, 107, 116, 123, 129, 136, 141, 145, 150, 154, 160, 166, 171, 178, 186,
        194, 202, 212, 223, 236, 251, 270, 295, 330, 381, 500, 626, 637, 641, 645, 648, 651,
        654, 657, 660, 663, 666, 670, 675, 679, 686, 695, 709, 842, 1006, 1211, 1561)),
    "DeepSeek-R1": ("deepseek-r1", 4_388, 803.8, (
        73, 89, 100, 110, 120, 129, 141, 155, 178, 206, 293, 389, 479, 602, 721, 792, 834, 846,
        853, 860, 869, 876, 884, 890, 898, 906, 912, 922, 933, 945, 958, 974, 990, 1010, 1027,
        1047, 1069, 1088, 1109, 1132, 1151, 1176, 1212, 1262, 1276, 1286, 1298, 1312, 1333,
        1432)),
}


def isl_mix_frac(model: str) -> tuple[float, ...]:
    """The dataset's equally likely input lengths over its mean (mean 1 within 0.3%); () for a
    model whose MLPerf dataset is not counted here."""
    entry = DATASETS.get(model)
    if entry is None:
        return ()
    _, _, mean, quantiles = entry
    return tuple(float(q) / mean for q in quantiles)


def quantiles_tokens(lengths) -> tuple[int, ...]:
    """The 50 quantiles of `lengths` at `LEVELS`, rounded to tokens."""
    return tuple(int(v) for v in np.quantile(np.asarray(lengths, float), LEVELS).round())


def _recount(git_dir: str) -> None:
    for model, (name, _, _, _) in DATASETS.items():
        text = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show",
             f"{LENGTHS_COMMIT}:mlperf-data/summaries/{name}.csv"],
            check=True, capture_output=True, text=True).stdout
        lengths = [float(r["input_length"]) for r in csv.DictReader(io.StringIO(text))]
        print(model, len(lengths), round(float(np.mean(lengths)), 1), quantiles_tokens(lengths))


if __name__ == "__main__":
    _recount(sys.argv[1])
