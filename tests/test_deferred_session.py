"""A deferred session (framework/deferred_session.py) starts on its first question and once,
and a block's session confs (``session_confs``) reach it only if it starts inside the block,
and are put back when the block ends. No Spark: a stand-in session with a conf store."""

from __future__ import annotations

from framework.deferred_session import DeferredSession, not_started, started
from framework.log.delta_commits import session_confs


class _Conf:
    def __init__(self, values: dict):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class _Session:
    def __init__(self):
        self.conf = _Conf({"a": "session's own"})
        self.version = "4.1"


def test_a_deferred_session_starts_on_its_first_question_and_once():
    starts = []
    deferred = DeferredSession(lambda: starts.append(1) or _Session())
    assert not deferred.started and not starts and not_started(deferred)
    assert deferred.version == "4.1" and deferred.version == "4.1"
    assert deferred.started and starts == [1] and not not_started(deferred)
    assert not not_started(_Session())


def test_confs_of_a_block_reach_a_session_that_starts_inside_it_and_are_put_back():
    deferred = DeferredSession(_Session)
    with session_confs(deferred, {"a": "outer", "b": "outer"}):
        with session_confs(deferred, {"b": "inner"}):
            assert deferred.conf.values == {"a": "outer", "b": "inner"}  # started here
        assert deferred.conf.values == {"a": "outer", "b": "outer"}
    assert deferred.conf.values == {"a": "session's own"}


def test_confs_of_a_block_the_session_did_not_start_in_are_forgotten():
    deferred = DeferredSession(_Session)
    with session_confs(deferred, {"a": "block's"}):
        pass
    assert not deferred.started
    assert deferred.conf.values == {"a": "session's own"}
    with session_confs(deferred, {"a": "block's"}):  # started already: set at once
        assert deferred.conf.values == {"a": "block's"}
    assert deferred.conf.values == {"a": "session's own"}


def test_the_session_itself_is_what_a_deferred_one_stands_for():
    session = _Session()
    deferred = DeferredSession(lambda: session)
    assert started(deferred) is session and deferred.started
    assert started(session) is session
