"""environment.yml (conda) and pyproject.toml (pip) must list the same packages and versions,
and every pin must agree with the lock (constraints.txt)."""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines):
    out = {}
    for ln in lines:
        ln = ln.strip()
        if not ln or ln.startswith(("#", "-")):
            continue
        name, _, ver = ln.partition("==")
        assert ver, f"unpinned requirement {ln!r}: pin it with =="
        out[name.strip().lower()] = ver.strip()
    return out


def pyproject_pins():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        reqs += extra
    return _pins(reqs)


def environment_pins():
    # environment.yml is simple enough to read without a YAML library: the `- pip:` list.
    lines, in_pip = [], False
    for raw in (ROOT / "environment.yml").read_text().splitlines():
        s = raw.strip()
        if s == "- pip:":
            in_pip = True
            continue
        if in_pip:
            if not s.startswith("- "):
                break
            lines.append(s[2:])
    return _pins(lines)


def test_environment_yml_matches_pyproject():
    py, env = pyproject_pins(), environment_pins()
    assert set(py) == set(env), (
        f"only in pyproject: {set(py) - set(env)}; only in environment.yml: {set(env) - set(py)}"
    )
    diff = {k: (py[k], env[k]) for k in py if py[k] != env[k]}
    assert not diff, f"versions differ (pyproject, environment.yml): {diff}"


def test_pins_agree_with_lock():
    lock = _pins((ROOT / "constraints.txt").read_text().splitlines())
    for name, ver in pyproject_pins().items():
        assert name in lock, (
            f"{name} missing from constraints.txt (run: python3 -m autograder.bootstrap lock)"
        )
        assert lock[name] == ver, f"{name}: pyproject {ver} vs lock {lock[name]}"


def test_torch_pinned_to_cpu_build_version():
    assert pyproject_pins()["torch"] == "2.13.0"


def test_sync_test_detects_drift(tmp_path, monkeypatch):
    """The comparison above must be able to fail: feed it a drifted copy."""
    (tmp_path / "environment.yml").write_text(
        (ROOT / "environment.yml").read_text().replace("numpy==2.4.6", "numpy==1.0.0"))
    for f in ("pyproject.toml", "constraints.txt"):
        (tmp_path / f).write_text((ROOT / f).read_text())
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="numpy"):
        test_environment_yml_matches_pyproject()
