"""The README's lab command serves the course in JupyterLab (with nbgrader's extensions)."""
import json
import shutil
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def test_make_lab_serves_the_course(tmp_path):
    """`make lab` copies the release into my-work/ (never overwriting) and serves lesson 1 there."""
    port, token = _free_port(), "course-test-token"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "BROWSER": "true"}
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token}"
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                status, _ = _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.time() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
        assert status == 200
        status, page = _get(f"{base}/lab?token={token}")
        assert status == 200 and "JupyterLab" in page
        status, body = _get(f"{base}/api/contents/my-work?token={token}")
        listed = {item["name"] for item in json.loads(body)["content"]}
        assert "lesson1" in listed
        status, body = _get(f"{base}/api/contents/my-work/lesson1/lesson1.ipynb?token={token}")
        nb = json.loads(body)["content"]
        assert nb["cells"], "lesson 1 opened empty"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


# --- in a real browser ----------------------------------------------------------------------
# Headless Chromium from Debian (packages chromium and chromium-driver, installed by
# `make test` through scripts/system-packages) drives `make lab`'s server as a learner would.

ANSWER = ("def gpt2_params(d_model, n_layers, d_vocab, n_ctx): return d_vocab * d_model + "
          "n_ctx * d_model + n_layers * (12 * d_model * d_model + 13 * d_model) + 2 * d_model")
"""A right Exercise 1, typed on one line (the editor indents a new line by itself)."""
NOT_ANSWERED = "Exercise 1 is not answered yet: write gpt2_params above"
INSTRUCTOR_TOOLS = ("Create Assignment", "Formgrader", "Assignment List", "Course List", "Nbgrader")


class _Lab:
    """`make lab` on a free port, serving a work folder of its own (``WORK=lab-test-PORT``,
    removed afterwards: the learner's my-work/ is not touched); stopped by its process group."""

    def __init__(self, tmp_path):
        self.port, self.token = _free_port(), "course-browser-token"
        self.work = f"lab-test-{self.port}"
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "BROWSER": "true",
               "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
               "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),
               "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
        args = (f"--no-browser --ip=127.0.0.1 --port={self.port} "
                f"--IdentityProvider.token={self.token}")
        self.proc = subprocess.Popen(["make", "-s", "lab", f"WORK={self.work}", f"LAB_ARGS={args}"],
                                     cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(tmp_path / "lab.log", "wb"),
                                     start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 120
        while True:
            try:
                _get(f"{self.base}/api/status?token={self.token}")
                return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise AssertionError("JupyterLab did not start: "
                                         + (tmp_path / "lab.log").read_text()[-2000:])
                time.sleep(0.5)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(ROOT / self.work, ignore_errors=True)


def _browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def _wait(driver, what, timeout=60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.5).until(lambda d: what(d))


def _cells(driver):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Notebook .jp-Cell")


def _outputs(cell, mime):
    from selenium.webdriver.common.by import By
    return [e.text for e in cell.find_elements(
        By.CSS_SELECTOR, f'.jp-OutputArea-output[data-mime-type="{mime}"]')]


def _idle(driver):
    return driver.execute_script(
        "const s = document.querySelector('.jp-Notebook-ExecutionIndicator');"
        "return s && s.getAttribute('data-status') === 'idle';")


def _click(driver, xpath, timeout=30):
    """Click the element at ``xpath`` once it is there and nothing (a toast, a dialog that is
    closing) lies over it."""
    from selenium.common.exceptions import ElementClickInterceptedException, NoSuchElementException
    from selenium.webdriver.common.by import By

    def attempt(d):
        try:
            d.find_element(By.XPATH, xpath).click()
            return True
        except (ElementClickInterceptedException, NoSuchElementException):
            return False
    _wait(driver, attempt, timeout)


def _click_element(driver, element, timeout=30):
    """Scroll ``element`` to the middle of the notebook and click it once nothing lies over it
    (under load, an output rendered above it may still be moving the cells)."""
    from selenium.common.exceptions import ElementClickInterceptedException

    def attempt(d):
        d.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
        try:
            element.click()
            return True
        except ElementClickInterceptedException:
            return False
    _wait(driver, attempt, timeout)


def _run_menu(driver, menu, item):
    _click(driver, f"//li[contains(@class,'lm-MenuBar-item')][.//div[text()='{menu}']]")
    _click(driver, f"//li[contains(@class,'lm-Menu-item')][.//div[text()='{item}']]")


def test_a_learner_in_a_real_browser(tmp_path):
    """Lesson 1 opens (saved, nothing to save), Run All reaches the first test cell and shows
    its one-line message, an answer typed into the page passes its test, and of nbgrader's
    tools only Validate is on the screen.  On failure: screenshot.png beside the log."""
    for command in ("chromium", "chromedriver"):
        assert shutil.which(command), (
            f"{command} is missing: `make test` installs it (scripts/system-packages)")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    lab = _Lab(tmp_path)
    driver = None
    try:
        driver = _browser(tmp_path)
        driver.get(f"{lab.base}/lab/tree/{lab.work}/lesson1/lesson1.ipynb?token={lab.token}")
        _wait(driver, lambda d: len(_cells(d)) > 40, timeout=90)
        _wait(driver, _idle, timeout=90)
        time.sleep(2)  # the kernel's language_info has reached the notebook by now
        tab = driver.find_element(By.CSS_SELECTOR, ".lm-DockPanel .lm-TabBar-tab.lm-mod-current")
        assert "jp-mod-dirty" not in tab.get_attribute("class"), "lesson 1 opened as unsaved"

        # nbgrader: Validate on the notebook's toolbar, none of the instructor tools anywhere
        toolbar = driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel-toolbar").text
        assert "Validate" in toolbar, toolbar
        menus = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")]
        page = driver.find_element(By.TAG_NAME, "body").text
        sidebars = " ".join((e.get_attribute("title") or "") + " " + (e.get_attribute("data-id") or "")
                            for e in driver.find_elements(By.CSS_SELECTOR, ".jp-SideBar .lm-TabBar-tab"))
        for tool in INSTRUCTOR_TOOLS:
            assert tool not in menus and tool not in page and tool.lower() not in sidebars.lower(), tool
        assert "news" not in page.lower(), "a news pop-up is showing"

        # Run All on the blank lesson: stops at the first test cell, with one line
        _run_menu(driver, "Run", "Run All Cells")
        _wait(driver, lambda d: any(_outputs(c, "application/vnd.jupyter.stderr") for c in _cells(d)),
              timeout=120)
        _wait(driver, _idle, timeout=60)
        cells = _cells(driver)
        errors = [(i, _outputs(c, "application/vnd.jupyter.stderr")) for i, c in enumerate(cells)]
        errors = [(i, e) for i, e in errors if e]
        nb = json.loads(_get(f"{lab.base}/api/contents/{lab.work}/lesson1/lesson1.ipynb"
                             f"?token={lab.token}")[1])["content"]
        first_test = next(i for i, c in enumerate(nb["cells"])
                          if c["metadata"].get("nbgrader", {}).get("grade"))
        # The first error is the first test cell's one line.  JupyterLab sends the cells'
        # requests without waiting for each reply and the kernel drops those queued behind an
        # error; on a loaded machine one may arrive after the drop and run, so a later cell may
        # show its own line too: never a traceback.
        assert errors and errors[0][0] == first_test, errors
        assert errors[0][1] == [NOT_ANSWERED], errors[0][1]
        for i, lines in errors[1:]:
            assert len(lines) == 1 and "is not answered yet" in lines[0], (i, lines)
        demo = _outputs(cells[first_test - 1], "application/vnd.jupyter.stdout")
        assert demo and demo[0].startswith("(This cell waits for Exercise 1"), demo

        # type the answer into the answer cell, run it, the demo and the test
        answer = first_test - 2
        editor = cells[answer].find_element(By.CSS_SELECTOR, ".cm-content")
        _click_element(driver, editor)
        editor.send_keys(Keys.CONTROL, "a")
        editor.send_keys(Keys.DELETE)
        editor.send_keys(ANSWER)
        for _ in range(3):  # the answer, the demo under it, the test
            driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.ENTER)
            time.sleep(0.5)
            _wait(driver, _idle, timeout=60)
        cells = _cells(driver)
        assert _outputs(cells[first_test], "application/vnd.jupyter.stderr") == []
        passed = _outputs(cells[first_test], "application/vnd.jupyter.stdout")
        assert passed and passed[0].startswith("Exercise 1 passed"), passed
        assert _outputs(cells[first_test - 1], "application/vnd.jupyter.stdout") == ["124,439,808"]
    except BaseException:
        if driver is not None:
            driver.save_screenshot(str(tmp_path / "screenshot.png"))
            print(f"screenshot: {tmp_path / 'screenshot.png'}; lab log: {tmp_path / 'lab.log'}")
        raise
    finally:
        if driver is not None:
            driver.quit()
        lab.stop()
