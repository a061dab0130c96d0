"""The shape-string parser of the accuracy tests, probe and validation rows lives in
`objectives/shapes.py` (the calibration fit reads the same rows); re-exported here."""

from objectives.shapes import KEYS, MLA_ROPE_DIM, build, parse_shape

__all__ = ["KEYS", "MLA_ROPE_DIM", "build", "parse_shape"]
