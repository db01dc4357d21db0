"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: what a person sees in the Dagster UI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager

from websockets.sync.client import connect

from llm_assets.platform.embedded_store import free_ports


class Page:
    def __init__(self, ws):
        self.ws, self.n = ws, 0

    def call(self, method: str, **params) -> dict:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.n:
                return message.get("result", {})

    def js(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                         awaitPromise=True).get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60.0):
        """Poll a JavaScript expression until it is truthy (the UI renders asynchronously): its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := self.js(expression):
                return value
            time.sleep(0.25)
        raise AssertionError(f"the page never satisfied {expression!r}:\n{self.js('document.body.innerText')[:2000]}")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def show_chart(self, name: str) -> tuple[int, list[list[float]]]:
        """Opens the chart `name` of the page's metadata table (its `[Show Markdown]` link): the PNG's natural
        width, and the size on screen of every PNG shown."""
        self.wait_for(f"document.body.innerText.includes('{name}')")
        self.skip_modal()
        self.js(f"""(() => {{ const row = [...document.querySelectorAll('tr')]
                     .find(r => r.innerText.trim().split(/\\s/)[0] == '{name}');
                   [...row.querySelectorAll('*')].reverse()  // the innermost: the link itself
                     .find(e => e.innerText && e.innerText.trim() == '[Show Markdown]').click(); }})()""")
        width = self.wait_for("""(() => { const img = [...document.querySelectorAll('img')]
                                  .find(i => i.src.startsWith('data:image/png') && i.complete);
                                return img && img.naturalWidth; })()""")
        self.settle()
        shown = self.js("""[...document.querySelectorAll('img')].filter(i => i.src.startsWith('data:image/png'))
                          .map(i => [i.getBoundingClientRect().width, i.getBoundingClientRect().height])""")
        return width, shown

    def skip_modal(self) -> None:
        """Dagster's community sign-up modal, shown once per browser profile."""
        self.js("""[...document.querySelectorAll('button')].filter(b => b.innerText.trim() == 'Skip')
                   .forEach(b => b.click())""")

    def settle(self) -> None:
        """Until the page's transitions (a dialog fading in) have finished, for a screenshot; a spinner that never
        stops ends the wait after a few seconds."""
        try:
            self.wait_for("document.getAnimations().every(a => a.playState != 'running')", timeout=5)
        except AssertionError:
            pass

    def screenshot(self, path) -> None:
        import base64

        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))


@contextmanager
def chromium(width: int = 1600, height: int = 1000):
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed (`make test` installs it)"
    (port,) = free_ports(1)
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                 f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1",
                                 f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            tabs = _poll(lambda: json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2)))
            url = next(t["webSocketDebuggerUrl"] for t in tabs if t["type"] == "page")
            with connect(url, max_size=None) as ws:
                page = Page(ws)
                page.call("Page.enable")
                yield page
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the browser and its renderer, GPU and zygote processes
            proc.wait()


def _poll(fn, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
