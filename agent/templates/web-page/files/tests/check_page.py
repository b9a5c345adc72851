"""The page's check. It always parses index.html with Python's html.parser: a doctype, a language, a
title, tags closed in the order they were opened, ids used once, every local file it links present,
and script.js ending by setting `document.body.dataset.ready`. When Chromium or Chrome is installed,
it also loads the page in it, headless, and makes sure the script ran to its end. It says which ran.

Run it from anywhere: python3 tests/check_page.py (exit 0: the page is fine).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "index.html"
SCRIPT = ROOT / "script.js"
READY = 'document.body.dataset.ready = "yes"'
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Elements whose end tag HTML lets you leave out (https://html.spec.whatwg.org/#optional-tags).
OPTIONAL_END = {
    "html", "head", "body", "li", "dt", "dd", "p", "rt", "rp", "optgroup", "option",
    "colgroup", "caption", "thead", "tbody", "tfoot", "tr", "td", "th",
}  # fmt: skip
LINKS = {("link", "href"), ("script", "src"), ("img", "src"), ("a", "href"), ("source", "src")}


class PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.open: list[tuple[str, int]] = []
        self.doctype = False
        self.lang = ""
        self.title = ""
        self.in_title = False
        self.ids: dict[str, int] = {}
        self.links: list[tuple[str, int]] = []

    def handle_decl(self, decl: str) -> None:
        self.doctype = self.doctype or decl.lower().split() == ["doctype", "html"]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        values = {name: value or "" for name, value in attrs}
        if tag == "html":
            self.lang = values.get("lang", "")
        if "id" in values:
            if values["id"] in self.ids:
                self.problems.append(
                    f"line {line}: id {values['id']!r} is used again (first on line {self.ids[values['id']]})"
                )
            self.ids.setdefault(values["id"], line)
        for element, attribute in LINKS:
            if tag == element and values.get(attribute):
                self.links.append((values[attribute], line))
        if tag == "title":
            self.in_title = True
        if tag not in VOID:
            self.open.append((tag, line))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.open.pop()

    def handle_endtag(self, tag: str) -> None:
        line = self.getpos()[0]
        if tag == "title":
            self.in_title = False
        if tag in VOID:
            return
        if not any(name == tag for name, _ in self.open):
            self.problems.append(f"line {line}: </{tag}> closes nothing (no <{tag}> is open)")
            return
        while self.open:
            name, opened = self.open.pop()
            if name == tag:
                return
            if name not in OPTIONAL_END:
                self.problems.append(f"line {line}: </{tag}> comes before <{name}> (line {opened}) is closed")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data

    def finish(self) -> list[str]:
        self.close()
        for name, opened in self.open:
            if name not in OPTIONAL_END:
                self.problems.append(f"line {opened}: <{name}> is never closed")
        if not self.doctype:
            self.problems.append("the page does not start with <!DOCTYPE html>")
        if not self.lang:
            self.problems.append('<html> has no lang attribute (e.g. <html lang="en">)')
        if not self.title.strip():
            self.problems.append("the page has no <title>, or an empty one")
        for target, line in self.links:
            parsed = urlparse(target)
            if parsed.scheme or parsed.netloc or not parsed.path:
                continue  # another site, or a link within the page
            if not (PAGE.parent / parsed.path).exists():
                self.problems.append(f"line {line}: {target} links a file that does not exist")
        return self.problems


def parse_page() -> list[str]:
    parser = PageParser()
    parser.feed(PAGE.read_text(encoding="utf-8"))
    problems = parser.finish()
    if not SCRIPT.is_file() or READY not in SCRIPT.read_text(encoding="utf-8"):
        problems.append(f"script.js must end with the line: {READY};")
    return problems


def load_in_browser(browser: str) -> list[str]:
    """The page in a headless browser: it loads, and the script ran to its last line."""
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom", PAGE.as_uri()]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return [f"{browser} did not load the page within 90 s"]
    if result.returncode != 0:
        return [f"{browser} failed (exit {result.returncode}): {result.stderr.strip()[-500:]}"]
    if 'data-ready="yes"' not in result.stdout:
        return ["in the browser, script.js did not run to its end (an error before its last line?)"]
    return []


def main() -> int:
    if not PAGE.is_file():
        print(f"{PAGE} does not exist")
        return 1
    problems = parse_page()
    ran = ["html.parser"]
    browser = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if browser:
        problems += load_in_browser(browser)
        ran.append(f"headless {Path(browser).name}")
        print(f"loaded index.html in headless {Path(browser).name} ({browser})")
    else:
        print(f"no headless browser installed (looked for {', '.join(BROWSERS)}): the page was parsed only")
    node = shutil.which("node")
    if node and SCRIPT.is_file():
        syntax = subprocess.run([node, "--check", str(SCRIPT)], capture_output=True, text=True, timeout=60)
        ran.append("node --check")
        if syntax.returncode != 0:
            problems.append(f"script.js: {syntax.stderr.strip()[-800:]}")
    for problem in problems:
        print(f"index.html: {problem}" if problem.startswith("line") else problem)
    verdict = "failed" if problems else "passed"
    print(f"check {verdict} ({' + '.join(ran)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
