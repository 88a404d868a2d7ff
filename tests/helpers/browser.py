"""Helpers for the browser test: a throwaway JupyterLab server and a headless Chromium.

The server runs from this environment's Python on a free localhost port with a random token,
on a temporary folder, with its own config/data/settings/workspace folders so nothing the
developer has in ``~/.jupyter`` leaks in. The browser is the system's Chromium (Debian's
``chromium`` package), driven by Playwright's Python package; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# Where to look for a browser, in order. COURSE_CHROMIUM overrides.
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# JupyterLab user settings for the throwaway server: no news/update pop-ups over the notebook,
# and every cell kept in the DOM (no virtual scrolling) so outputs can be read off the page.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def find_chromium() -> str | None:
    """Path of a usable Chromium executable, or None."""
    env = os.environ.get("COURSE_CHROMIUM")
    for cand in ([env] if env else []) + list(CHROMIUM_CANDIDATES):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """``with LabServer(root, tmp) as lab:`` -- JupyterLab serving ``root``; ``lab.url(path)``."""

    def __init__(self, root: Path, scratch: Path, startup_timeout: float = 60.0,
                 view: str = "student"):
        self.root, self.scratch, self.startup_timeout = Path(root), Path(scratch), startup_timeout
        self.view = view  # what `bootstrap lab` shows: "student" or "instructor"
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.log_path = self.scratch / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def _env(self) -> dict:
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)  # the kernel must use the inline backend to show figures
        for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                         ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"),
                         ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"),
                         ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces")]:
            (self.scratch / sub).mkdir(parents=True, exist_ok=True)
            env[var] = str(self.scratch / sub)
        for rel, value in LAB_SETTINGS.items():
            f = self.scratch / "lab-settings" / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(value))
        from autograder.bootstrap import lab_view_env

        return lab_view_env(self.view, env)

    def url(self, path: str = "lab") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?token={self.token}"

    def __enter__(self) -> LabServer:
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        self._log = open(self.log_path, "w")  # noqa: SIM115 -- closed in __exit__
        self.proc = subprocess.Popen(cmd, env=self._env(), cwd=self.root,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError(f"JupyterLab did not answer in {self.startup_timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # the server shuts its kernels down on SIGTERM
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


# ---- driving JupyterLab in the page ---------------------------------------------------------

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on show


def open_notebook(page, lab: LabServer, rel_path: str, timeout_ms: int = 60_000) -> None:
    """Open ``rel_path`` (relative to the server root); wait until its kernel is up and idle.

    A notebook without kernel metadata makes JupyterLab ask which kernel to start; the dialog
    is answered with its default (the course's Python 3), as a student would.
    """
    # A workspace of its own per notebook: the page shows that notebook alone.
    workspace = re.sub(r"[^A-Za-z0-9]+", "-", rel_path).strip("-")
    page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{rel_path}"))
    page.locator(f"{PANEL} .jp-Cell").first.wait_for(timeout=timeout_ms)
    page.wait_for_function(
        """() => document.querySelector('.jp-Dialog') || kernelReady()""".replace(
            "kernelReady()", _KERNEL_READY_JS), timeout=timeout_ms)
    if page.locator(".jp-Dialog", has_text="Select Kernel").count():
        page.locator(".jp-Dialog .jp-mod-accept").click()
    wait_kernel_idle(page, timeout_ms)


_KERNEL_READY_JS = """(() => {
    const p = document.querySelector('PANEL');
    const s = p && p.querySelector('.jp-Notebook-ExecutionIndicator');
    const k = p && p.querySelector('.jp-KernelName');
    return !!(s && k && s.getAttribute('data-status') === 'idle'
              && !/No Kernel/.test(k.textContent));
})()""".replace("PANEL", PANEL)


def wait_kernel_idle(page, timeout_ms: int = 60_000) -> None:
    page.wait_for_function(f"() => {_KERNEL_READY_JS}", timeout=timeout_ms)


def start_run_all(page) -> None:
    """Run > Run All Cells from the menu bar, as a student would; returns once it started."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # Started once some prompt shows a number or a star (queued/running).
    page.wait_for_function(
        """() => [...document.querySelectorAll('PANEL .jp-CodeCell .jp-InputArea-prompt')]
                 .some(e => /\\[(\\d+|\\*)\\]/.test(e.textContent))""".replace("PANEL", PANEL))


def wait_run_done(page, timeout_ms: int = 120_000) -> list[str]:
    """Wait until no prompt shows a star and the kernel is idle; return the code cells' prompts."""
    page.wait_for_function(
        """() => { const ps = [...document.querySelectorAll(
                       'PANEL .jp-CodeCell .jp-InputArea-prompt')];
                   return ps.every(e => !e.textContent.includes('*')) && KERNEL_READY; }"""
        .replace("KERNEL_READY", _KERNEL_READY_JS).replace("PANEL", PANEL), timeout=timeout_ms)
    return [t.strip() for t in
            page.locator(f"{PANEL} .jp-CodeCell .jp-InputArea-prompt").all_text_contents()]


def run_all_cells(page, timeout_ms: int = 120_000) -> list[str]:
    """Run all cells and wait for the run to end (see start_run_all, wait_run_done)."""
    start_run_all(page)
    return wait_run_done(page, timeout_ms)


def save_notebook(page, path: Path, timeout_ms: int = 20_000) -> None:
    """File > Save Notebook and wait until the file on disk has been rewritten."""
    before = path.stat().st_mtime_ns
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Save Notebook$")).click()
    deadline = time.monotonic() + timeout_ms / 1000
    while path.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was not saved")
        time.sleep(0.1)
    time.sleep(0.2)  # let the write finish


def output_texts(page) -> list[str]:
    """Text of every output area in the open notebook, in order."""
    return page.locator(f"{PANEL} .jp-OutputArea-output").all_text_contents()
