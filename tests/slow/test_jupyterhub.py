"""A class's JupyterHub, with nbgrader's Assignment List, in a real browser (issue 48 item 8).

A real JupyterHub (the registry's ``jupyterhub``) on localhost, from :data:`HUB_CONFIG` (the
``jupyterhub_config.py`` the instructor guide shows): the shared-password authenticator, the
simple local spawner (each student's JupyterLab a process of this account, in a home of its
own under the hub's folder), the Python port of ``configurable-http-proxy`` (no node), the
course's student view of JupyterLab. The course and the exchange are
tests/helpers/exchange.py's (those of tests/slow/test_exchange.py).

The instructor releases the small fixture assignment. In Chromium, ann logs in to the hub, opens
Nbgrader > Assignment List in her JupyterLab, fetches the assignment, (answers it through the
file system) and submits it. The instructor runs ``nbgrader collect``, ``course-grade`` on
``submitted/`` and ``nbgrader release_feedback``. ann refreshes the Assignment List, fetches her
feedback with its button, and her feedback page, opened from her server, is hers: her score and
her answer.

Skipped, with the reason, only where no Chromium executable can be found.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM_FLAGS, find_chromium, free_port
from helpers.exchange import (
    ASSIGNMENT,
    COURSE_ID,
    RIGHT_ANSWER,
    answer_right,
    course_folder,
    course_grade,
    done,
    env,
    fetched_page,
    formgrader_api,
    student_home,
)

# The hub's jupyterhub_config.py (docs/guides/instructor.md shows it from here). It is read in
# the hub's folder, which holds the hub's database, its cookie secret and the students' homes.
HUB_CONFIG = '''\
import os
import sys
from pathlib import Path

from autograder.bootstrap import lab_view_env

c = get_config()  # noqa: F821
hub_folder = Path.cwd()

# Who may log in: the class list, with one password for all (a workshop's set-up).
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = os.environ["CLASS_PASSWORD"]
c.Authenticator.allowed_users = {"ann", "bob"}

# Each student's JupyterLab: a process of the hub's account, in a home folder of its own.
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(hub_folder / "home" / "{username}")
c.Spawner.default_url = "/lab"
# the course's student view (nbgrader's Assignment List; no formgrader, no Create Assignment)
c.Spawner.environment = lab_view_env("student", {})

# The proxy in front of the hub and the students' servers: the Python configurable-http-proxy.
# It hands on a response only once it is whole: the login page's progress stream ends when the
# student's server is up, so the proxy waits longer than a server's start (milliseconds).
c.ConfigurableHTTPProxy.command = [str(Path(sys.executable).parent / "configurable-http-proxy"),
                                   "--proxy-timeout", "120000"]
c.JupyterHub.bind_url = "http://127.0.0.1:8000"
'''


class Hub:
    """``with Hub(folder, password) as hub:`` -- JupyterHub from HUB_CONFIG on free localhost
    ports, starting; ``hub.wait_up()`` waits until it answers through its proxy."""

    def __init__(self, folder: Path, password: str):
        self.folder, self.password = folder, password
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "jupyterhub.log"

    def __enter__(self) -> Hub:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = HUB_CONFIG
        if os.geteuid() == 0:  # CI containers run as root; jupyter_server asks to be told
            config += 'c.Spawner.args = ["--allow-root"]\n'
        (self.folder / "jupyterhub_config.py").write_text(config)
        cmd = [sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py",
               f"--JupyterHub.bind_url={self.base}", f"--JupyterHub.hub_port={free_port()}",
               f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{free_port()}"]
        self._log = open(self.log_path, "w")  # noqa: SIM115 -- closed in __exit__
        self.proc = subprocess.Popen(cmd, cwd=self.folder, env=env() | {
            "CLASS_PASSWORD": self.password}, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        return self

    def wait_up(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterHub exited with {self.proc.returncode}:\n{self.log()}")
            try:  # through the proxy: both are up
                with urllib.request.urlopen(f"{self.base}/hub/api", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"JupyterHub did not answer in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # the hub stops the students' servers and the proxy
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def test_student_fetches_and_submits_through_the_hub(tmp_path, monkeypatch):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium to drive: see tests/helpers/browser.py's CHROMIUM_CANDIDATES")
    from playwright.sync_api import sync_playwright

    times = {"start": time.monotonic()}
    monkeypatch.setenv("PATH", env()["PATH"])  # nbgrader's gradebook runs this venv's alembic
    course, _, exchange = course_folder(tmp_path)
    hub_folder = tmp_path / "hub"
    home = student_home(hub_folder / "home" / "ann", "ann", exchange)
    password = secrets.token_hex(8)
    with Hub(hub_folder, password) as hub, sync_playwright() as pw:
        # the instructor releases (formgrader's Generate and Release) while the hub starts
        instructor = formgrader_api(course)
        done(instructor.generate_assignment(ASSIGNMENT))
        done(instructor.release_assignment(ASSIGNMENT))
        times["released"] = time.monotonic()
        hub.wait_up()
        times["hub up"] = time.monotonic()
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(90_000)
            page.goto(f"{hub.base}/hub/login")
            page.fill("#username_input", "ann")
            page.fill("#password_input", password)
            page.click("#login_submit")
            page.wait_for_url(f"{hub.base}/user/ann/lab**")
            menu = page.locator(".lm-MenuBar-item", has_text="Nbgrader")
            menu.click()
            items = page.locator(".lm-Menu-itemLabel").all_text_contents()
            assert "Assignment List" in items and "Formgrader" not in items, items
            page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
            times["lab"] = time.monotonic()

            released = page.locator("#released_assignments_list .list_item",
                                    has_text=ASSIGNMENT)
            assert COURSE_ID in released.inner_text()
            released.get_by_role("button", name="Fetch").click()
            fetched = page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT)
            submit = fetched.get_by_role("button", name="Submit")
            submit.wait_for()
            answer_right(home / ASSIGNMENT)  # ann answers (her files, on her server)
            submit.click()
            submitted = page.locator("#submitted_assignments_list .list_item",
                                     has_text=ASSIGNMENT)
            submitted.wait_for()
            times["submitted"] = time.monotonic()

            done(instructor.collect(ASSIGNMENT))
            assert os.listdir(course / "submitted") == ["ann"]
            course_grade(course)
            released_fb = done(instructor.release_feedback(ASSIGNMENT))
            assert released_fb.count("Releasing feedback for student") == 1, released_fb
            times["graded"] = time.monotonic()

            page.locator("#refresh_assignments_list").click()
            submitted.get_by_text("(feedback available to fetch)").wait_for()
            submitted.get_by_role("button", name="Fetch Feedback").click()
            submitted.get_by_text("(view feedback)").wait_for()
            text = fetched_page(home / ASSIGNMENT)  # exactly one page, in her home
            feedback = sorted((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))[0]
            rel = feedback.relative_to(home).as_posix()
            page.goto(f"{hub.base}/user/ann/files/{rel}")
            shown = page.locator("body").inner_text()
            times["feedback"] = time.monotonic()
        finally:
            browser.close()
    for page_text in (text, shown):
        assert "Score: 6.0 / 6.0" in page_text and RIGHT_ANSWER in page_text, page_text[:2000]
        assert "HIDDEN_TEST_MARKER" not in page_text
    stages = list(times)
    print("stages (s): " + ", ".join(
        f"{b} {times[b] - times[a]:.1f}" for a, b in zip(stages, stages[1:]))
        + f"; total {times[stages[-1]] - times['start']:.1f}")
