"""The one grading configuration: defaults in one place, the course folder's nbgrader config
built from it, the course's preprocessors inserted into nbgrader's own lists. Fast."""

from __future__ import annotations

import os

import pytest
from nbgrader.converters import Autograde, GenerateFeedback
from traitlets.config.loader import PyFileConfigLoader

from autograder import grade, selfcheck
from autograder.grading.autograde import preprocessors as pp
from autograder.grading.autograde.demo import SkipDemoCells
from autograder.grading.config import CELL_TIMEOUT_S, GradeConfig
from autograder.grading.parent.course import write_config


def test_command_line_defaults_are_the_config_defaults(tmp_path):
    args = grade._parser().parse_args([str(tmp_path), "--out", str(tmp_path / "out")])
    cpus = os.cpu_count() or 1
    assert GradeConfig.from_args(args) == GradeConfig(workers=cpus, cpus=cpus)
    args = grade._parser().parse_args([str(tmp_path), "--out", "o", "--unsandboxed",
                                       "--cell-timeout", "7", "--memory", "1000"])
    config = GradeConfig.from_args(args)
    assert (config.sandboxed, config.cell_timeout, config.memory_mb) == (False, 7, 1000)
    with pytest.raises(AttributeError):  # frozen: nothing changes it on the way down
        config.memory_mb = 1


def test_one_cell_timeout_default():
    import autograder.nbgrader_config as course_config

    assert GradeConfig().cell_timeout == CELL_TIMEOUT_S
    assert course_config.c.ExecutePreprocessor.timeout == CELL_TIMEOUT_S
    assert selfcheck.CELL_TIMEOUT == CELL_TIMEOUT_S  # course-check (not training notebooks)


def test_config_travels_as_plain_data():
    config = GradeConfig(timeout=12.5, nproc=7, sandboxed=False)
    assert GradeConfig.from_dict(config.to_dict()) == config


def test_course_config_inserts_the_course_preprocessors_into_nbgraders_lists(tmp_path):
    write_config(tmp_path, GradeConfig(cell_timeout=7))
    c = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    assert c.Execute.timeout == 7
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    got = c.Autograde.autograde_preprocessors
    # all of nbgrader's, in its order, its Execute as the course's subclass (kernel queue)
    assert default[0].__name__ == "Execute" and issubclass(pp.SealedExecute, default[0])
    queued = [default[0] if p is pp.SealedExecute else p for p in got]
    assert [p for p in queued if p in default] == default
    assert got[got.index(pp.SealedExecute) + 1] is pp.StderrIsNotFailure  # right after it
    names = [p.__name__ for p in got]
    assert names.index("LimitOutputSize") == names.index("LimitOutput") + 1
    assert got[got.index(pp.SealedExecute) - 1] is SkipDemoCells  # demo cells out before it
    assert c.SkipDemoCells.source_root == str(tmp_path / "source")
    assert len(got) == len(default) + 3
    fb = c.GenerateFeedback.preprocessors
    assert [p.__name__ for p in fb] == [
        "GetGrades", "HideHiddenTests", "SanitizeOutputs",
        *[p.__name__ for p in GenerateFeedback.class_traits()["preprocessors"].default()[1:]],
    ]


def test_a_renamed_nbgrader_preprocessor_fails_loudly():
    with pytest.raises(RuntimeError, match="no HideHiddenTests"):
        pp._insert([pp.StderrIsNotFailure], {pp.HideHiddenTests: pp.LimitOutputSize})
