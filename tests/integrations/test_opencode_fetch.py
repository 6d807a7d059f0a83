"""OpenCode fetches nothing for what ``vera connect`` writes (issue 42 item 8).

At each start OpenCode installs its plugin SDK (``@opencode-ai/plugin``) from the npm
registry into every ``.opencode/`` folder it finds, and waits for that install before it
loads any plugin. VERA therefore writes no ``.opencode/``: its plugin (which imports no
package) and hook live in ``.vera/opencode/`` and the plugin is listed by path in the
project's config. The real CLI runs against a registry stand-in that records every request,
in a user home where OpenCode has already installed its own SDK (its user-level install,
which it does with or without VERA); the control shows a ``.opencode/`` folder would make it
fetch."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import test_hooks_runtime_sessions as sessions
from runtime_fakes import FakeChat, FakeVera

from vera.integrations.artifacts import OPENCODE_PLUGIN

opencode_home, opencode_plugin_sdk = sessions.opencode_home, sessions.opencode_plugin_sdk
vera, chat = sessions.vera, sessions.chat


class Registry:
    """An npm registry that has nothing and remembers what was asked."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.paths.append(self.path)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def registry() -> Iterator[Registry]:
    server = Registry()
    yield server
    server.close()


def run(root: Path, home: Path, registry: Registry) -> subprocess.CompletedProcess:
    env = {**sessions.opencode_env(home), "npm_config_registry": registry.url}
    return subprocess.run([str(sessions.runtime_cli("opencode")), "run", "hello"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("user_opencode_folder", [False, True])
def test_veras_opencode_setup_fetches_nothing(tmp_path: Path, opencode_home: Path,
                                              opencode_plugin_sdk: Path, vera: FakeVera,
                                              chat: FakeChat, registry: Registry,
                                              user_opencode_folder: bool) -> None:
    root = sessions.project(tmp_path, "opencode", "suggest", vera)
    sessions.configure_opencode(root, vera, chat)
    assert json.loads((root / "opencode.json").read_text())["plugin"] == [
        f"./{OPENCODE_PLUGIN}"]
    if user_opencode_folder:  # control: any .opencode folder, such as a team's own plugin
        (root / ".opencode").mkdir()
        (root / ".opencode" / "team.js").write_text("export const T = async () => ({});\n")
    done = run(root, opencode_home, registry)
    assert done.returncode == 0, done.stderr[-2000:]
    # VERA's plugin ran (it adds the hook's line to the first user message).
    assert any(sessions.TAG in json.dumps(body.get("messages")) for body in chat.bodies)
    if user_opencode_folder:
        assert registry.paths == ["/@opencode-ai%2fplugin"]
    else:
        assert registry.paths == []
        assert not (root / ".opencode").exists()
