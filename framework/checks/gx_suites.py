"""Great Expectations' side of the checks: the suites, and the warehouse's GE project.

Each check's violations are counted by Spark (``framework.checks.rules``) into a row of a
metrics frame, one row per check judged together; GE judges the frame with one named
expectation per guarantee, in the warehouse's file-backed project, so every result lands
in the validations store and ``report`` renders it as Data Docs. The spec's own
``expectations:`` run as a second suite over the after version's user columns.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from framework.checks import gx_import, gx_project
from framework.checks.catalogue import GUARANTEES
from framework.checks.rules import SAMPLE_ROWS
from framework.log.warehouse import Warehouse
from framework.spec import TopicSpec

__all__ = ["DATASOURCE", "METRICS_DATASOURCE", "Project", "failed_rows", "guarantee_expectations", "metrics_frame",
           "observed", "spec_expectations"]

#: Each stage's validation definition runs the guarantees suite over the metrics frame.
DATASOURCE = "topiclake"
#: GE's pandas datasource: the metrics frames the guarantees are judged on, and a small
#: local partition's records when pandas judges its spec's expectations (``pandas_expectations``).
METRICS_DATASOURCE = "topiclake-metrics"
BATCH_DEFINITION = "whole frame"


def guarantee_expectations():
    gx_import.imported()
    import great_expectations.expectations as gxe

    # A map expectation skips NULLs: a guarantee the stage does not check shows as
    # "missing", neither passed nor failed.
    return [
        gxe.ExpectColumnValuesToBeBetween(column=g.column, min_value=0, max_value=0, description=g.description,
                                          meta={"guarantee": g.name})
        for g in GUARANTEES
    ]


def spec_expectations(spec: TopicSpec):
    gx_import.imported()
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    return [
        ExpectationConfiguration(type=e.type, kwargs=e.to_dict()["kwargs"], meta=e.to_dict().get("meta") or {})
        .to_domain_obj()
        for e in spec.expectations
    ]


def _signature(expectations) -> list:
    """What makes two suites the same, ignoring GE's ids."""
    import json

    out = []
    for e in expectations:
        body = e.configuration.to_json_dict()
        body.pop("id", None)
        body.pop("rendered_content", None)
        out.append(json.dumps(body, sort_keys=True, default=str))
    return out


class Project:
    """The warehouse's GE project: one datasource, and suites, assets and validation
    definitions fetched or added by name, kept in sync with the code and the spec."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse
        self.context = gx_project.context(warehouse)

    def _datasource(self, name: str):
        try:
            return self.context.data_sources.get(name)
        except KeyError:
            if name == METRICS_DATASOURCE:
                return self.context.data_sources.add_pandas(name)
            # We persist what we validate ourselves; GE caching each batch would double it.
            return self.context.data_sources.add_spark(name, persist=False)

    def _batch_definition(self, asset_name: str, datasource: str):
        source = self._datasource(datasource)
        try:
            asset = source.get_asset(asset_name)
        except LookupError:
            asset = source.add_dataframe_asset(asset_name)
        try:
            return asset.get_batch_definition(BATCH_DEFINITION)
        except KeyError:
            return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)

    def _suite(self, name: str, expectations):
        import great_expectations as gx
        from great_expectations.exceptions import DataContextError

        try:
            suite = self.context.suites.get(name)
        except DataContextError:
            return self.context.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
        if _signature(suite.expectations) != _signature(expectations):
            for old in list(suite.expectations):
                suite.delete_expectation(old)
            for new in expectations:
                suite.add_expectation(new)
            suite.save()
        return suite

    def _definition(self, name: str, batch_definition, suite):
        import great_expectations as gx
        from great_expectations.exceptions import DataContextError

        try:
            found = self.context.validation_definitions.get(name)
        except DataContextError:
            found = None
        if found is not None and found.suite.name == suite.name and found.data.name == batch_definition.name \
                and found.asset.name == batch_definition.data_asset.name \
                and found.data_source.name == batch_definition.data_asset.datasource.name:
            return found
        if found is not None:
            self.context.validation_definitions.delete(name)
        return self.context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_definition,
                                                                               suite=suite))

    def run(self, definition: str, suite_name: str, expectations, asset: str, frame, result_format: str,
            datasource: str = DATASOURCE, keep: int | None = None):
        """Validate ``frame``; the suite then keeps its newest ``keep`` stored results (all when None)."""
        with gx_project.STORES:
            suite = self._suite(suite_name, expectations)
            validation = self._definition(definition, self._batch_definition(asset, datasource), suite)
            result = validation.run(batch_parameters={"dataframe": frame}, result_format=result_format)
            if keep is not None:
                gx_project.prune_results(self.warehouse, suite_name, keep)
            return result


def metrics_frame(checks: Sequence[tuple[Mapping[str, int], Sequence[str], Mapping[str, object]]]):
    """One row per check: per guarantee the number of violations (None = not checked), and
    the check's context. ``checks``: (counts per guarantee code, the codes checked, context).

    The counts were computed by Spark over the violations (``rules.summary``); GE judges
    these rows with its pandas engine, in milliseconds (its Spark engine took ~0.8 s a
    check, more than the Spark work it judged).
    """
    import pandas as pd

    rows = []
    for counts, checked, context in checks:
        row: dict[str, object] = {g.column: (counts.get(g.code, 0) if g.code in checked else None)
                                  for g in GUARANTEES}
        row.update(context)
        rows.append(row)
    return pd.DataFrame(rows, dtype=object)


def failed_rows(result, rows: int) -> list[list[str]]:
    """Per row of the metrics frame, the guarantees GE failed it on (from each failed
    expectation's unexpected rows: ``result_format="COMPLETE"`` lists them all; a result
    that lists none fails every row, which is the row of a one-row frame)."""
    failed: list[list[str]] = [[] for _ in range(rows)]
    for item in result.results:
        if item.success:
            continue
        name = (item.expectation_config.meta or {}).get("guarantee") or item.expectation_config.type
        unexpected = (item.result or {}).get("unexpected_index_list")
        if unexpected is None:  # not listed (erred, or not COMPLETE): every row fails on it
            unexpected = range(rows)
        for index in unexpected:
            failed[int(index)].append(name)
    return failed


def observed(item) -> str:
    """A short account of a failed spec expectation."""
    info = item.exception_info or {}
    if isinstance(info, dict) and info.get("raised_exception"):
        return f"could not be evaluated: {str(info.get('exception_message'))[:300]}"
    result = item.result or {}
    if "unexpected_count" in result:
        sample = list(result.get("partial_unexpected_list") or [])[:SAMPLE_ROWS]
        return f"{result['unexpected_count']} unexpected value(s), e.g. {sample}"
    if "observed_value" in result:
        return f"observed {result['observed_value']!r}"
    return "failed"
