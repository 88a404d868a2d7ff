"""Per-student CPU, task and memory isolation: cgroups where the machine allows, else pinning.

One student's grading (nbgrader, the kernel, everything the student's code starts, even under
``os.setsid``) must not slow a student graded next to it past its cell timeout. The runner
puts each student's job into a group of its own for its lifetime (:meth:`Isolation.job`), in
the first way this machine allows (:func:`isolation`, decided once per grading run):

- ``cgroup v2`` (writable, with ``cpu`` and ``pids`` delegated, or made so by moving this
  process into a leaf): a child cgroup per student with ``cpu.max`` (``GradeConfig.threads``),
  ``pids.max`` and, with the ``memory`` controller, ``memory.max = memory_mb + tmp_mb``;
- ``cgroup v1`` (``cpu`` and ``pids`` hierarchies writable): the same CPU quota and task cap;
  memory stays ``RLIMIT_AS`` plus the ``/tmp`` size cap;
- ``pinned`` (no usable cgroup): cores of its own per job (``sched_setaffinity``), shared
  round-robin when there are fewer cores than workers. Best effort: a process may widen its
  own affinity again; ``RLIMIT_NPROC`` still caps the tasks.

The child process joins its group itself (``limits.py``, before ``exec``): nothing is forked
between the parent's bookkeeping and the join.

Example: ``with isolation(config).job() as place: place.spec`` is the plain data
``limits.py`` applies, e.g. ``{"cgroup_procs": [".../cg-1/cgroup.procs"], "cpus": []}``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

PERIOD_US = 100_000  # CPU quota period (the kernel's default)
OPTIONAL = {"memory.swap.max"}
_COUNTER = itertools.count()


@dataclass
class Place:
    """Where one job runs: the cgroups it joins and the cores it may use (plain data)."""

    cgroups: list[Path] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)

    @property
    def spec(self) -> dict:
        return {"cgroup_procs": [str(g / "cgroup.procs") for g in self.cgroups],
                "cpus": list(self.cpus)}

    def pids(self) -> set[int]:
        """Processes still in the job's groups (for the kill sweep)."""
        out = set()
        for g in self.cgroups:
            try:
                out |= {int(p) for p in (g / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return out


class Isolation:
    """Hands out a :class:`Place` per job and removes its groups afterwards."""

    kind = "none"

    def __init__(self, config):
        self.config = config

    @contextlib.contextmanager
    def job(self):
        """A place for one job (one worker's share)."""
        yield Place()

    def release(self, place: Place) -> None:
        pass


class Pinned(Isolation):
    """Fallback: each job on cores of its own (see the module docstring)."""

    kind = "pinned cores (no cgroup)"

    def __init__(self, config, cpus: list[int] | None = None):
        super().__init__(config)
        cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
        n = max(1, min(config.workers, len(cpus)))
        size = len(cpus) // n
        self.slots = [cpus[i * size:(i + 1) * size] for i in range(n)]
        self.slots[-1] += cpus[n * size:]  # a remainder core goes to the last slot
        self.users = [0] * n
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def job(self):
        with self.lock:  # the least used slot
            i = min(range(len(self.slots)), key=lambda k: self.users[k])
            self.users[i] += 1
        try:
            yield Place(cpus=list(self.slots[i]))
        finally:
            with self.lock:
                self.users[i] -= 1


class _Cgroups(Isolation):
    """A child group per job in each writable hierarchy; limits written before the job starts."""

    def __init__(self, config, parents: dict[str, Path]):
        super().__init__(config)
        self.parents = parents  # controller -> the directory the job groups are made in

    def _limits(self) -> dict[str, dict[str, str]]:
        raise NotImplementedError

    @contextlib.contextmanager
    def job(self):
        name = f"course-grade-{os.getpid()}-{next(_COUNTER)}"
        groups = []
        try:
            for ctl, files in self._limits().items():
                g = self.parents[ctl] / name
                if g.is_dir():
                    # left by a course-grade that was killed (SIGKILL runs no clean-up) and had
                    # this process's pid: nothing of this run is in it yet, so it goes
                    _remove(g)
                g.mkdir()
                groups.append(g)
                for fname, value in files.items():
                    if fname in OPTIONAL and not (g / fname).exists():
                        continue  # e.g. no swap accounting on this kernel
                    (g / fname).write_text(value)
            yield Place(cgroups=groups)
        finally:
            for g in reversed(groups):
                _remove(g)


def _remove(group: Path) -> None:
    """Kill what is left in ``group`` and remove it (a group must be empty to go)."""
    import signal
    import time

    for _ in range(50):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return
        for p in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.05)


class CgroupV2(_Cgroups):
    kind = "cgroup v2"

    def __init__(self, config, parent: Path, memory: bool):
        super().__init__(config, {"unified": parent})
        self.memory = memory

    def _limits(self):
        cfg = self.config
        files = {"cpu.max": f"{cfg.threads * PERIOD_US} {PERIOD_US}", "pids.max": str(cfg.pids)}
        if self.memory:
            files["memory.max"] = str((cfg.memory_mb + cfg.tmp_mb) * 2**20)
            files["memory.swap.max"] = "0"
        return {"unified": files}


class CgroupV1(_Cgroups):
    kind = "cgroup v1 (cpu, pids)"

    def _limits(self):
        cfg = self.config
        return {
            "cpu": {"cpu.cfs_period_us": str(PERIOD_US),
                    "cpu.cfs_quota_us": str(cfg.threads * PERIOD_US)},
            "pids": {"pids.max": str(cfg.pids)},
        }


def _own_cgroups() -> dict[str, str]:
    """{controller or '' (v2): this process's path} from /proc/self/cgroup."""
    out = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        for c in ctls.split(",") if ctls else [""]:
            out[c] = path
    return out


def _mounts() -> dict[str, Path]:
    """{controller or '' (v2): mount point} of the cgroup file systems."""
    out = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        dev, mnt, fstype, opts, *_ = line.split()
        if fstype == "cgroup2":
            out.setdefault("", Path(mnt))
        elif fstype == "cgroup":
            for o in opts.split(","):
                out.setdefault(o, Path(mnt))
    return out


def _try_v2(config, mounts, own) -> Isolation | None:
    if "" not in mounts or "" not in own:
        return None
    here = mounts[""] / own[""].lstrip("/")
    try:
        available = set((here / "cgroup.controllers").read_text().split())
        enabled = set((here / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    if not {"cpu", "pids"} <= available or not os.access(here, os.W_OK):
        return None
    want = {"cpu", "pids"} | ({"memory"} & available)
    if not want <= enabled:
        # controllers can be enabled for children only in a group with no processes of its
        # own (the root excepted): move this process into a leaf first, then enable them
        try:
            leaf = here / f"course-grade-{os.getpid()}-grader"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            (here / "cgroup.subtree_control").write_text(
                " ".join(f"+{c}" for c in sorted(want - enabled)))
        except OSError:
            return None
    return CgroupV2(config, here, "memory" in want)


def _try_v1(config, mounts, own) -> Isolation | None:
    parents = {}
    for ctl in ("cpu", "pids"):
        if ctl not in mounts or ctl not in own:
            return None
        here = mounts[ctl] / own[ctl].lstrip("/")
        if not (here / "cgroup.procs").exists() or not os.access(here, os.W_OK):
            return None
        parents[ctl] = here
    return CgroupV1(config, parents)


_CHOSEN: dict = {}
_CHOSEN_LOCK = threading.Lock()


def isolation(config) -> Isolation:
    """The isolation for this grading run (one per configuration; decided once)."""
    with _CHOSEN_LOCK:
        if config not in _CHOSEN:
            _CHOSEN[config] = _choose(config)
        return _CHOSEN[config]


def _choose(config) -> Isolation:
    mode = config.isolation
    if mode == "none":
        return Isolation(config)
    if mode == "pinned":
        return Pinned(config)
    try:
        mounts, own = _mounts(), _own_cgroups()
    except OSError:
        mounts, own = {}, {}
    found = _try_v2(config, mounts, own) or _try_v1(config, mounts, own)
    if found is None and mode == "cgroup":
        raise RuntimeError("no writable cgroup (v2 with cpu+pids delegated, or v1) here")
    return found or Pinned(config)
