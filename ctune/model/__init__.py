"""A cost model: what a candidate will measure, cost to compile, and whether it fails,
predicted from its genes before it is built (docs/cost-model.md). scikit-learn is an
optional extra (``ctune[model]``); :func:`unavailable` says whether it is here."""

from ctune.model.cost_model import (
    DEFAULT_ALPHA,
    CostModel,
    Example,
    Prediction,
    trials_for_a_bound,
    unavailable,
)
from ctune.model.features import MISSING, FeatureMap, sm_number

__all__ = [
    "DEFAULT_ALPHA",
    "MISSING",
    "CostModel",
    "Example",
    "FeatureMap",
    "Prediction",
    "sm_number",
    "trials_for_a_bound",
    "unavailable",
]
