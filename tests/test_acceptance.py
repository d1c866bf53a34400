"""Every acceptance scenario in ../shared/acceptance, through `topiclake simulate`."""


import pytest

from framework.cli.main import main
from tests.support.acceptance_files import acceptance_files


@pytest.mark.parametrize("path", acceptance_files(), ids=lambda p: p.name)
def test_acceptance_scenario(spark, path, capsys):
    code = main(["simulate", str(path)])
    out = capsys.readouterr().out
    assert f"PASS {path}" in out, out
    assert out.strip().endswith("1 passed, 0 failed")
    assert code == 0


def test_simulate_reports_a_mismatch_and_exits_1(spark, tmp_path, capsys):
    scenario = tmp_path / "wrong.yaml"
    scenario.write_text(
        "spec: {topic: t, partitions: 1, config: {cleanup.policy: compact, min.cleanable.dirty.ratio: 0.0}}\n"
        "steps:\n"
        "  - produce: [{key: a, value: '1', timestamp: 0}, {key: a, value: '2', timestamp: 0}]\n"
        "  - maintain: {now: 10}\n"
        "  - expect: {offsets: [0, 1]}\n"
    )
    code = main(["simulate", str(scenario)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"FAIL {scenario}: step 3 (expect, line 5): partition 0 offsets [1] != expected [0, 1]" in out
    assert "0 passed, 1 failed" in out


def test_simulate_refuses_a_malformed_scenario_without_running(spark, tmp_path, capsys):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("spec: {topic: t, partitions: 1}\nsteps:\n  - produse: []\n")
    code = main(["simulate", str(scenario)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert f"{scenario}:3:" in line and "did you mean produce" in line


def test_expect_spec_error_fails_when_the_spec_is_fine(spark, tmp_path, capsys):
    scenario = tmp_path / "fine.yaml"
    scenario.write_text("expect_spec_error: true\nspec: {topic: t, partitions: 1}\nsteps: []\n")
    assert main(["simulate", str(scenario)]) == 1
    assert "the spec was accepted" in capsys.readouterr().out
