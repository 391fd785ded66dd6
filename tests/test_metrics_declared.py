"""Every metric a registered suite or task declares is one the cell schema accepts: a metric missing from
``bench.results.cell_schema.METRICS`` is refused at the write, after the work (an attack cell's hour) is done."""
import importlib

import pytest

from bench.results.cell_schema import METRICS
from suites import SUITES, get_suite


def declared_metrics(suite) -> set[str]:
    module = importlib.import_module(type(suite).__module__)
    tasks = suite.tasks.values() if isinstance(suite.tasks, dict) else suite.tasks
    names = set()
    for task in tasks:
        names |= {task.main_metric, *getattr(task, "clean_metrics", ())}
    for attribute, value in vars(module).items():  # module-level metric lists (RATE_METRICS, ROW_METRICS, ...)
        if attribute.endswith("_METRICS") and isinstance(value, (tuple, list, frozenset, set)):
            names |= set(value)
    return names


@pytest.mark.parametrize("suite_name", sorted(SUITES))
def test_every_declared_metric_passes_the_cell_schema(suite_name):
    missing = declared_metrics(get_suite(suite_name)) - METRICS
    assert not missing, f"{suite_name} declares metrics the cell schema refuses: {sorted(missing)}"


def test_the_check_reads_the_adversarial_clean_metrics():
    assert {"clean_accuracy", "clean_mcc"} <= declared_metrics(get_suite("adversarial"))
