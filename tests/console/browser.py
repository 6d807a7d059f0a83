"""A real browser for the console tests: Debian's headless Chromium driven through its
chromium-driver by selenium, with axe-core (npm) for the accessibility check. Both come
from ``scripts/browser``; when they are missing the test fails, it never skips."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
# axe impacts that fail a page.
BLOCKING = ("serious", "critical")


def chromium() -> webdriver.Chrome:
    if not (shutil.which("chromium") and shutil.which("chromedriver") and AXE.exists()):
        # Installs them (apt-get, npm) if this machine may; fails the test otherwise.
        done = subprocess.run([str(ROOT / "scripts" / "browser")], capture_output=True,
                              text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"scripts/browser failed; the console's browser tests need "
                        f"chromium, chromium-driver and axe-core:\n{done.stderr[-2000:]}")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--disable-gpu"):
        options.add_argument(flag)
    service = Service(executable_path=shutil.which("chromedriver") or "chromedriver")
    return webdriver.Chrome(options=options, service=service)


def accessibility_violations(driver: webdriver.Chrome) -> list[dict]:
    """axe-core's serious and critical violations on the current page."""
    driver.execute_script(AXE.read_text())
    violations = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then(r => done(r.violations));")
    return [{"id": v["id"], "impact": v["impact"], "nodes": len(v["nodes"])}
            for v in violations if v["impact"] in BLOCKING]


def keep_screenshot(driver: webdriver.Chrome, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
