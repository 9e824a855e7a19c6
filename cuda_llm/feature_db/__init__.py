"""The feature database: a catalogue of GPU optimization features and what runs learned about them.

``load_catalogue`` gives the features (data files in ``catalogue/``), ``detect_features`` tells which
ones a candidate uses, ``StatsStore`` keeps per (feature, task family, arch) statistics in SQLite, and
``rank_features`` / ``assign_features`` turn them into the planner's offer (a seeded bandit).
"""

from cuda_llm.feature_db.bandit import (
    RankedFeature, applicable, assign_features, explain, rank_features, task_filters, task_float_inputs, task_tolerance,
)
from cuda_llm.feature_db.catalogue import (
    CatalogueError, arch_name, feature_index, get_feature, load_catalogue, load_catalogue_from, parse_arch, supports,
)
from cuda_llm.feature_db.detect import detect_features, split_source
from cuda_llm.feature_db.model import Detector, Feature, ResourceRule, SourceRule
from cuda_llm.feature_db.stats import (
    DB_ENV, FeatureStats, StatsStore, StatsStoreError, default_path, features_to_credit, normalize_arch,
)

__all__ = [
    "CatalogueError", "DB_ENV", "Detector", "Feature", "FeatureStats", "RankedFeature", "ResourceRule", "SourceRule",
    "StatsStore", "StatsStoreError", "applicable", "arch_name", "assign_features", "default_path", "detect_features",
    "explain", "feature_index", "features_to_credit", "get_feature", "load_catalogue", "load_catalogue_from",
    "normalize_arch", "parse_arch", "rank_features", "split_source", "supports", "task_filters", "task_float_inputs", "task_tolerance",
]
