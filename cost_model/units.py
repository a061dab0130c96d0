"""Unit conversions and the one FLOP convention.

Everything inside archscout is SI (seconds, bytes, FLOP, FLOP/s, bytes/s). Human units
(TFLOP/s, TB/s, GiB, µs, ms) exist only at the edges: catalog files and printed output.
"""

from __future__ import annotations

import numpy as np

# one multiply-accumulate = one multiply + one add (NVIDIA, AI Model Co-Design (2026))
FLOP_PER_MAC = 2.0

TERA = 1e12
GIGA = 1e9
GIB_BYTES = 2.0**30
BITS_PER_BYTE = 8.0
US_PER_S = 1e6
MS_PER_S = 1e3
BF16_BYTES = 16 / BITS_PER_BYTE  # one BF16 value: the unquantized width of weights and activations
NS_PER_S = 1e9


def gemm_flop(m, n, k):
    """FLOPs of C[M,N] = A[M,K] @ B[K,N]: 2·M·N·K (broadcasts over numpy arrays)."""
    return FLOP_PER_MAC * np.multiply(np.multiply(m, n, dtype=np.float64), k)
