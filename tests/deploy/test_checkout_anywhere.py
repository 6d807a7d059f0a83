"""The chart and compose runs work from a checkout anywhere, /tmp included (CI clones
wherever it likes). Each container mounts a /tmp of its own, which would hide a checkout
under /tmp, and with it the editable venv that stands in for the image's installed code
(``container_processes.ContainerHost``). Here a checkout lives under the machine's /tmp
with a venv whose code is in the checkout, as an editable install's is, and a container
with its own /tmp still imports that code through the image's venv path."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from container_processes import IMAGE_VENV, ContainerHost, ContainerProcess, image_config

PROBE = "vera_checkout_probe"


def _checkout_with_editable_venv(root: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
                   check=True)
    [site_packages] = (root / ".venv" / "lib").glob("python3*/site-packages")
    (root / "src").mkdir()
    (root / "src" / f"{PROBE}.py").write_text("WHERE = 'the checkout'\n")
    (site_packages / "checkout.pth").write_text(f"{root / 'src'}\n")


def test_a_checkout_under_tmp_is_seen_by_a_container_that_mounts_its_own_tmp(
        tmp_path: Path) -> None:
    with (tempfile.TemporaryDirectory(prefix="vera-checkout-", dir="/tmp") as checkout,
          tempfile.NamedTemporaryFile(prefix="vera-machine-tmp-", dir="/tmp") as machine_file):
        root = Path(checkout)
        _checkout_with_editable_venv(root)
        host = ContainerHost(tmp_path / "hosts", None, checkout=root)
        host.write_hosts({})
        container_tmp = tmp_path / "container-tmp"
        container_tmp.mkdir()
        container = ContainerProcess(
            name="probe", address="127.0.0.1", argv=[], env=image_config()[0],
            mounts={"/tmp": container_tmp}, log_path=tmp_path / "log")

        ran = host.exec(container, [f"{IMAGE_VENV}/bin/python", "-c",
                                    f"import {PROBE}, os; print({PROBE}.WHERE);"
                                    " print(sorted(os.listdir('/tmp')))"])

        assert ran.returncode == 0, ran.stderr
        where, tmp_listing = ran.stdout.splitlines()
        assert where == "the checkout"
        # The container's /tmp is still its own volume, not the machine's.
        assert Path(machine_file.name).name not in tmp_listing
