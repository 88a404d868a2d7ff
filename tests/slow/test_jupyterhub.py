"""A class's JupyterHub, with nbgrader's Assignment List, in a real browser (issue 48 item 8).

A real JupyterHub (the registry's ``jupyterhub``) on localhost, from :data:`HUB_CONFIG` (the
``jupyterhub_config.py`` the instructor guide shows): the shared-password authenticator, the
simple local spawner (each student's JupyterLab a process of this account, in a home of its
own under the hub's folder), the Python port of ``configurable-http-proxy`` (no node), the
course's student view of JupyterLab. The course and the exchange are
tests/helpers/exchange.py's (those of tests/slow/test_exchange.py).

The instructor releases the small fixture assignment (nbgrader's generate and release, through
its Python API as formgrader's buttons call it: one import of nbgrader for every step), while
the hub starts. In Chromium, ann and bob log in to the hub, each in a window of their own; each
opens Nbgrader > Assignment List in their JupyterLab (the student view: no Formgrader), fetches
the assignment with its button and submits it (ann having answered it through the file system,
bob as released). The instructor collects, runs ``course-grade`` on ``submitted/`` and releases
the feedback. Each student refreshes the Assignment List, fetches their feedback with its
button, and opens their page from their own server: ann's says 6 of 6 with her answer, bob's 0
of 6 without it; bob's window asking ann's server for her page gets the hub's 403.

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
# jupyterhub_config.py for a class
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
        cmd = [str(Path(sys.executable).parent / "jupyterhub"), "-f", "jupyterhub_config.py",
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

    def __exit__(self, exc_type=None, *exc) -> None:
        if exc_type is not None:  # pytest shows it with the failure
            print(f"JupyterHub's log ({self.log_path}):\n{self.log()}")
        if self.proc.poll() is None:
            self.proc.terminate()  # the hub stops the students' servers and the proxy
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def _student_page(browser, hub: Hub, name: str, password: str):
    """A browser window of ``name``'s own (cookies and all), logging in to the hub; the hub
    starts their JupyterLab."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(120_000)
    page.goto(f"{hub.base}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    return page


def _assignment_list(page, hub: Hub, name: str) -> None:
    """In the student's JupyterLab, Nbgrader > Assignment List (the student view: no
    Formgrader); fetches the assignment with its button."""
    page.wait_for_url(f"{hub.base}/user/{name}/lab**")
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    items = page.locator(".lm-Menu-itemLabel").all_text_contents()
    assert "Assignment List" in items and "Formgrader" not in items, items
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    released = page.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT)
    assert COURSE_ID in released.inner_text()
    released.get_by_role("button", name="Fetch").click()


def _item(page, section: str):
    return page.locator(f"#{section}_assignments_list .list_item", has_text=ASSIGNMENT)


def test_students_fetch_and_submit_through_the_hub(tmp_path, monkeypatch):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium to drive: see tests/helpers/browser.py's CHROMIUM_CANDIDATES")
    from playwright.sync_api import sync_playwright

    times = {"start": time.monotonic()}
    monkeypatch.setenv("PATH", env()["PATH"])  # nbgrader's gradebook runs this venv's alembic
    course, _, exchange = course_folder(tmp_path)
    hub_folder, students = tmp_path / "hub", ("ann", "bob")
    homes = {name: student_home(hub_folder / "home" / name, name, exchange)
             for name in students}
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
            # both log in at once; the hub starts their servers side by side
            pages = {name: _student_page(browser, hub, name, password) for name in students}
            for name, page in pages.items():
                _assignment_list(page, hub, name)
            for page in pages.values():
                _item(page, "fetched").get_by_role("button", name="Submit").wait_for()
            times["fetched"] = time.monotonic()
            # ann answers (her files, on her server); bob hands in the release as fetched
            answer_right(homes["ann"] / ASSIGNMENT)
            for page in pages.values():
                _item(page, "fetched").get_by_role("button", name="Submit").click()
            for page in pages.values():
                _item(page, "submitted").wait_for()
            times["submitted"] = time.monotonic()

            done(instructor.collect(ASSIGNMENT))
            assert sorted(os.listdir(course / "submitted")) == list(students)
            course_grade(course)
            released_fb = done(instructor.release_feedback(ASSIGNMENT))
            assert released_fb.count("Releasing feedback for student") == 2, released_fb
            times["graded"] = time.monotonic()

            texts, shown, urls = {}, {}, {}
            for name, page in pages.items():
                submitted = _item(page, "submitted")
                page.locator("#refresh_assignments_list").click()
                submitted.get_by_text("(feedback available to fetch)").wait_for()
                submitted.get_by_role("button", name="Fetch Feedback").click()
                submitted.get_by_text("(view feedback)").wait_for()
                # exactly one page, in the student's own home ...
                texts[name] = fetched_page(homes[name] / ASSIGNMENT)
                # ... and served by the student's own server
                found = (homes[name] / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")
                urls[name] = f"{hub.base}/user/{name}/files/{next(found).relative_to(homes[name])}"
                page.goto(urls[name])
                shown[name] = page.locator("body").inner_text()
            # bob's window asks ann's server for her page: the hub does not let him in
            denied = pages["bob"].goto(urls["ann"]).status
            intruder = pages["bob"].locator("body").inner_text()
            times["feedback"] = time.monotonic()
        finally:
            browser.close()
    for page_text in (texts["ann"], shown["ann"]):
        assert "Score: 6.0 / 6.0" in page_text and RIGHT_ANSWER in page_text, page_text[:2000]
    for page_text in (texts["bob"], shown["bob"]):
        assert "Score: 0.0 / 6.0" in page_text and RIGHT_ANSWER not in page_text
        assert "NotImplementedError" in page_text, page_text[:2000]
    assert not any("HIDDEN_TEST_MARKER" in t for t in [*texts.values(), *shown.values()])
    assert denied == 403 and "Score:" not in intruder, (denied, intruder[:2000])
    stages = list(times)
    print("stages (s): " + ", ".join(
        f"{b} {times[b] - times[a]:.1f}" for a, b in zip(stages, stages[1:]))
        + f"; total {times[stages[-1]] - times['start']:.1f}")
