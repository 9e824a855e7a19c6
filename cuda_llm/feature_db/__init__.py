"""The feature database: a catalogue of GPU optimization features and what runs learned about them.

``load_catalogue`` gives the features (data files in ``catalogue/``), ``detect_features`` tells which
ones a candidate uses, ``StatsStore`` keeps per (feature, task family, arch) statistics in SQLite, and
``rank_features`` / ``assign_features`` turn them into the planner's offer (a seeded bandit);
``credit_step`` decides what one measured candidate teaches (credit.py); ``recredit`` detects the features
of every stored candidate again and rebuilds the statistics after the detectors changed (recredit.py: it
reads run directories, hence cuda_llm.runs).

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.tasks, cuda_llm.runs.
"""

from cuda_llm.feature_db.bandit import (
    RankedFeature, applicable, assign_features, explain, rank_features, task_filters, task_float_inputs, task_tolerance,
)
from cuda_llm.feature_db.catalogue import (
    CatalogueError, arch_name, feature_index, get_feature, load_catalogue, load_catalogue_from, parse_arch, supports,
)
from cuda_llm.feature_db.credit import Credit, StepOutcome, credit_step, detect_pair, headroom_closed
from cuda_llm.feature_db.detect import detect_features, split_source
from cuda_llm.feature_db.model import Detector, Feature, ResourceRule, RuleGroup, SourceRule
from cuda_llm.feature_db.stats import (
    DB_ENV, FeatureStats, StatsStore, StatsStoreError, default_path, normalize_arch,
)

__all__ = [
    "CatalogueError", "Credit", "DB_ENV", "Detector", "Feature", "FeatureStats", "RankedFeature", "ResourceRule", "RuleGroup", "SourceRule",
    "StepOutcome", "StatsStore", "StatsStoreError", "applicable", "arch_name", "assign_features", "credit_step",
    "default_path", "detect_features", "detect_pair", "headroom_closed",
    "explain", "feature_index", "get_feature", "load_catalogue", "load_catalogue_from",
    "normalize_arch", "parse_arch", "rank_features", "split_source", "supports", "task_filters", "task_float_inputs", "task_tolerance",
]
