"""archscout layer 1: scalar scores of a candidate, each with a direction and a unit: the serving
objectives from the cost model's operating points (`serving_scores`: frontier area, TTFT, GPUs)
and the accuracy proxy (`predict_loss`: predicted pre-training loss, its band and range flags),
with the fit of the proxy's coefficients on its declared calibration set (`fit_coefficients`).

`__all__` is what other packages and users call; the modules are this package's own."""

from objectives.accuracy import (
    BASE_LAWS, DEFAULT_LAW, LossProxy, predict_loss, ptq_estimate, ranking_loss_nats,
    summarize_shape,
)
from objectives.accuracy_coefficients import SHIPPED_RECORDS
from objectives.accuracy_fit import (
    CALIBRATION_SET_FILE, METRICS, SIGN_METRICS, UNVERIFIED, coefficients_toml, fit_coefficients,
    read_rows, shipped_calibration_set,
)
from objectives.accuracy_terms import (
    ASPECT_KAPPA_CENTRAL, ASPECT_RATIO_MORPH_RANGE, ASPECT_RATIO_OPT_CENTRAL, aspect_ratio_penalty,
)
from objectives.serving import (
    OBJECTIVES, ServiceLevel, ServingScores, Window, serving_scores,
)
from objectives.shapes import architecture_from_shape

__all__ = [
    "ASPECT_KAPPA_CENTRAL", "ASPECT_RATIO_MORPH_RANGE", "ASPECT_RATIO_OPT_CENTRAL", "BASE_LAWS",
    "CALIBRATION_SET_FILE", "DEFAULT_LAW", "LossProxy", "METRICS", "OBJECTIVES", "SHIPPED_RECORDS",
    "SIGN_METRICS", "ServiceLevel", "ServingScores", "UNVERIFIED", "Window",
    "architecture_from_shape",
    "aspect_ratio_penalty", "coefficients_toml", "fit_coefficients", "predict_loss",
    "ptq_estimate", "ranking_loss_nats", "read_rows", "serving_scores", "shipped_calibration_set",
    "summarize_shape",
]
