"""A spec's own expectations judged over a small local partition's records in pandas, with
no Spark job (and in a new process, no JVM), where Great Expectations' pandas answer is
its Spark answer.

A check counted by Arrow (``arrow_scope``, ``arrow_whole``) still ran the spec's
``expectations:`` over Spark's frame of the after version, so a checked run of a topic
with expectations started the JVM in a new process for them alone (a quick-start
``validate`` 21.4 s, stop 114). Great Expectations evaluates each expectation type by one
metric per engine, and for some types the two are the same function of the records:

- nulls (``isnull`` / ``isNull``), set membership of strings (``isin``), string lengths in
  code points (``str.len`` / ``length``), row counts and column existence;
- a regular expression searched in each string (``str.contains``, Python's ``re``;
  ``rlike``, Java's ``Pattern.find``) when the pattern is written in the part of the two
  syntaxes that means the same in both (:func:`portable_regex`: no ``.``, ``$``, word
  boundaries, lookaround, back references, flags or Unicode classes) and the column's
  strings are printable ASCII and ``\\t\\n\\v\\f\\r``, on which Python's ``\\s``, ``\\d`` and
  ``\\w`` match what Java's do.

Anything else (a binary key or value, a timestamp or headers column, ``row_condition``,
which is engine syntax, ``unexpected_rows_expectation``, which is Spark SQL, a type not
listed here) keeps Spark's frame. ``tests/test_pandas_expectations.py`` pins each type's
answer here to its answer over Spark on a shared corpus.
"""

from __future__ import annotations

import re
import warnings
from typing import Mapping

from framework.checks import gx_suites
from framework.log import local_records
from framework.log.table_layout import RECORD_COLUMNS
from framework.spec import TopicSpec

__all__ = ["KWARGS", "frame_for", "judged_here", "portable_regex", "records"]

_MAP = frozenset({"column", "mostly"})
_BETWEEN = frozenset({"min_value", "max_value", "strict_min", "strict_max"})
#: The expectation types judged here, and the keyword arguments each may carry here.
KWARGS: Mapping[str, frozenset] = {
    "expect_column_to_exist": frozenset({"column"}),
    "expect_column_values_to_not_be_null": _MAP,
    "expect_column_values_to_be_null": _MAP,
    "expect_column_values_to_be_in_set": _MAP | {"value_set"},
    "expect_column_values_to_not_be_in_set": _MAP | {"value_set"},
    "expect_column_value_lengths_to_be_between": _MAP | _BETWEEN,
    "expect_column_value_lengths_to_equal": _MAP | {"value"},
    "expect_column_values_to_match_regex": _MAP | {"regex"},
    "expect_column_values_to_not_match_regex": _MAP | {"regex"},
    "expect_table_row_count_to_be_between": _BETWEEN,
    "expect_table_row_count_to_equal": frozenset({"value"}),
}
#: Types that judge a column's strings, and those of them that search a pattern.
_STRINGS = frozenset({"expect_column_value_lengths_to_be_between", "expect_column_value_lengths_to_equal",
                      "expect_column_values_to_match_regex", "expect_column_values_to_not_match_regex"})
_PATTERNS = frozenset({"expect_column_values_to_match_regex", "expect_column_values_to_not_match_regex"})
#: What a ``value_set`` of a column of each kind may hold (a string compared with a number
#: is cast by Spark and not by pandas).
_SET_MEMBERS = {"string": str, "long": int}

#: One token of a portable pattern: an escaped metacharacter, a class escape, a quantifier
#: (greedy or lazy), a group's start, or a character that is literal in both syntaxes.
_TOKEN = re.compile(r"""\\[.{}\[\]()*+?|^$\\/-]|\\[sSdDwW]|(?:[*+?]|\{\d+(?:,\d*)?\})\??|\(\?:|[()|^]
                        |[A-Za-z0-9 _,:;'"/@#%&=<>!~`-]""", re.VERBOSE)
#: A bracketed class: an optional ``^``, then literals, escapes and ranges of letters or
#: digits (no ``&``, ``~`` or ``|``: Java reads ``&&`` as an intersection, and Python
#: reserves doubled ones for set operations).
_CLASS = re.compile(r"""\[\^?(?:[A-Za-z0-9](?:-[A-Za-z0-9])?|\\[sSdDwW\]\[\\^-]|[ _,:;'"/@#%=<>!`.*+?(){}$])+
                        -?\]""", re.VERBOSE)
#: The characters on which Python's and Java's ``\s``, ``\d`` and ``\w`` agree.
_SAFE_TEXT = r"^[\t\n\x0b\x0c\r\x20-\x7e]*$"

# pandas warns that a searched pattern with a group could be extracted instead: GE's
# pandas metric searches, as Spark's does, and the warning would be a run's only output
warnings.filterwarnings("ignore", message="This pattern is interpreted as a regular expression, and has match groups",
                        category=UserWarning)


def portable_regex(pattern: object) -> bool:
    """Whether ``pattern`` is written only in syntax that Python's ``re`` and Java's
    ``Pattern`` read alike, so that searching it finds the same strings (with
    :data:`_SAFE_TEXT`'s characters). Checked token by token; a quantifier needs something
    before it that it may repeat."""
    if not isinstance(pattern, str) or len(pattern) > 1000:
        return False
    at, depth, repeatable = 0, 0, False
    while at < len(pattern):
        found = _CLASS.match(pattern, at) if pattern[at] == "[" else _TOKEN.match(pattern, at)
        if found is None:
            return False
        token = found.group()
        if token[0] in "*+?{":
            if not repeatable:
                return False
            repeatable = False
        elif token in ("(", "(?:"):
            depth, repeatable = depth + 1, False
        elif token == ")":
            if depth == 0:
                return False
            depth, repeatable = depth - 1, True
        else:
            repeatable = token not in ("|", "^")
        at = found.end()
    try:
        re.compile(pattern)
    except re.error:
        return False
    return depth == 0


def _column_kind(spec: TopicSpec, column: object) -> str | None:
    """``offset``'s kind, or the key's or value's when it is a string; else None (not here)."""
    if column == "offset":
        return "long"
    if column in ("key", "value") and getattr(spec, f"{column}_type") == "string":
        return "string"
    return None


def _judged_here(spec: TopicSpec, expectation) -> bool:
    kwargs = expectation.kwargs or {}
    kind = expectation.type
    if kind not in KWARGS or not set(kwargs) <= KWARGS[kind]:
        return False
    if kind == "expect_column_to_exist" or kind.startswith("expect_table_"):
        return True
    column = _column_kind(spec, kwargs.get("column"))
    if column is None or (kind in _STRINGS and column != "string"):
        return False
    if kind in _PATTERNS and not portable_regex(kwargs.get("regex")):
        return False
    if "value_set" in kwargs:
        members = kwargs["value_set"]
        return isinstance(members, (list, tuple)) and all(type(v) is _SET_MEMBERS[column] for v in members)
    return True


def judged_here(spec: TopicSpec) -> bool:
    """Whether each of ``spec``'s expectations is one pandas judges as Spark does (the
    module's text); a pattern's column is also checked in :func:`records`."""
    return bool(spec.expectations) and all(_judged_here(spec, e) for e in spec.expectations)


def records(spec: TopicSpec, path: str, version: int):
    """The record columns of ``version`` of the partition table at ``path`` as a pandas
    frame in offset order, read by Arrow when it is a small local version
    (``local_records.small_plain_files``) and :func:`judged_here`; None otherwise, or when a
    column a pattern is searched in holds a character outside :data:`_SAFE_TEXT`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not judged_here(spec):
        return None
    files = local_records.small_plain_files(path, version)
    tables = None if files is None else local_records.visible_columns(files, list(RECORD_COLUMNS))
    if tables is None:
        return None
    table = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if table is None:
        return None
    for expectation in spec.expectations:
        if expectation.type in _PATTERNS:
            values = table[expectation.kwargs["column"]]
            if not pc.all(pc.match_substring_regex(values.fill_null(""), _SAFE_TEXT), min_count=0).as_py():
                return None
    return table.sort_by("offset").to_pandas()


def frame_for(spec: TopicSpec, path: str, version: int | None, after):
    """The frame ``spec``'s expectations judge for the after ``version`` of the partition
    table at ``path``, and its Great Expectations datasource: :func:`records` in pandas
    when it gives them, else ``after`` (Spark's frame, or a callable that gives it: called
    only then) restricted to the record columns."""
    local = None if version is None else records(spec, path, version)
    if local is not None:
        return local, gx_suites.METRICS_DATASOURCE
    return (after() if callable(after) else after).select(*RECORD_COLUMNS), gx_suites.DATASOURCE
