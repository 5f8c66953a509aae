"""Datasets of test inputs with expected answers, and experiments that run a target over them."""

from jurist.experiments.records import (DatasetItem, DatasetVersion, ExperimentItem, ExperimentRecord, ItemScore,
                                        RubricRef)

__all__ = ["DatasetItem", "DatasetVersion", "ExperimentItem", "ExperimentRecord", "ItemScore", "RubricRef"]
