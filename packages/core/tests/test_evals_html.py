"""The HTML page of a report: self-contained, every value escaped, and what a reader sees
once headless Chromium (Debian's ``chromium``) has rendered it: the text of the page and
the bars of the chart in a screenshot."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fevex.evals import (
    CaseResult,
    EvalReport,
    Score,
    compare_evaluation_reports,
    render_html_report,
)
from fevex.models import Usage

INJECTED = "<script>document.title='pwned'</script>"
ATTRIBUTE_BREAKOUT = '"><img src=x onerror="document.title=1">'
RED = (0xCF, 0x22, 0x2E)
GREEN = (0x1A, 0x7F, 0x37)
GREY = (0xAF, 0xB8, 0xC1)


def case(case_id: str, value: float, *, output: str = "Account 42 is active.") -> CaseResult:
    passed = value == 1.0
    reason = ATTRIBUTE_BREAKOUT if case_id == "active" else f"reason for {case_id}"
    return CaseResult(
        case_id=case_id,
        status="passed" if passed else "failed",
        input=f"question {case_id}",
        expected={"output": "Account 42 is active."},
        output=output,
        tool_calls=("accounts_get",),
        duration_ms=12.0,
        usage=Usage(10, 5),
        scores={"exact_output": Score(value, passed, reason)},
        metadata={"note": ATTRIBUTE_BREAKOUT},
    )


def reports() -> tuple[EvalReport, EvalReport]:
    baseline = EvalReport(
        "support-regression", "agent", "support", "v1", "support", "1",
        (case("active", 1.0), case(INJECTED, 1.0), case("owner", 1.0)),
    )  # fmt: skip
    current = EvalReport(
        "support-regression", "agent", "support", "v2", "support", "1",
        (case("active", 1.0), case(INJECTED, 1.0, output=INJECTED), case("owner", 0.0,
                                                                          output="I do not know.")),
    )  # fmt: skip
    return baseline, current


def test_the_page_needs_no_host_and_escapes_every_value() -> None:
    baseline, current = reports()
    page = render_html_report(current, baseline=baseline)

    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=&quot;document.title=1&quot;&gt;" in page
    # Nothing to fetch: no URL, no src or href, and a policy that forbids any request.
    assert "://" not in page
    assert not re.search(r"<[^>]*\s(src|href)=", page)
    assert "default-src 'none'" in page
    assert "<svg" in page
    assert page.count("<rect") == 2 + 2 * len(current.cases)


def test_without_a_baseline_the_page_says_so() -> None:
    _, current = reports()
    page = render_html_report(current)
    assert "No baseline was given." in page
    assert page.count("<rect") == 2 + len(current.cases)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium (Debian's chromium package) is not installed")
    return found


def render(page: Path, profile: Path, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--hide-scrollbars", "--force-device-scale-factor=1",
            f"--user-data-dir={profile}", *arguments, page.as_uri(),
        ],
        capture_output=True,
        timeout=180,
        check=False,
    )  # fmt: skip


class PageText(HTMLParser):
    """The text a reader sees (not the style sheet) and the elements of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.title = ""
        self._inside: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._inside:
            while self._inside.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self._inside and self._inside[-1] == "title" and "svg" not in self._inside:
            self.title += data
        elif not self._inside or self._inside[-1] != "style":
            self.text.append(data)


def pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, data = 8, b""
    width = height = channels = 0
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        body = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0)
            assert colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            data += body
        position += 12 + length
    raw = zlib.decompress(data)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                near = min(
                    (abs(guess - left), 0, left),
                    (abs(guess - up), 1, up),
                    (abs(guess - corner), 2, corner),
                )
                line[i] = (line[i] + near[2]) & 0xFF
        rows.append(line)
        previous = line
    rgb = [(line[i], line[i + 1], line[i + 2]) for line in rows for i in range(0, stride, channels)]
    return width, height, rgb


def test_chromium_shows_the_results_the_chart_and_the_injected_text_as_text(
    tmp_path: Path,
) -> None:
    baseline, current = reports()
    comparison = compare_evaluation_reports(baseline, current)
    page = tmp_path / "report.html"
    page.write_text(render_html_report(current, baseline=baseline, comparison=comparison))

    dumped = render(page, tmp_path / "profile", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr.decode(errors="replace")[-2000:]
    seen = PageText()
    seen.feed(dumped.stdout.decode())
    text = " ".join(" ".join(seen.text).split())

    # The injected script did not run, and is shown as the text it is.
    assert seen.title == "fevex eval: support-regression"
    assert "script" not in seen.tags
    assert "img" not in seen.tags
    assert INJECTED in text
    assert ATTRIBUTE_BREAKOUT in text
    assert "support-regression" in text
    assert "agent support, version v2 · dataset support 1" in text
    assert "3 cases 2 passed 1 failed 0 errors 1 regressions" in text
    assert (
        "case 'owner', scorer 'exact_output': passed in the baseline, fails now (reason for owner)"
    ) in text
    assert "owner failed, regressed exact_output 0.00 (baseline 1.00) reason for owner" in text
    assert seen.tags.count("rect") == 2 + 2 * 3

    shot = tmp_path / "report.png"
    painted = render(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1000,900")
    assert painted.returncode == 0, painted.stderr.decode(errors="replace")[-2000:]
    width, height, rgb = pixels(shot.read_bytes())
    assert (width, height) == (1000, 900)
    colours = {colour: rgb.count(colour) for colour in (RED, GREEN, GREY)}
    # The chart's bars: two green and one red (the regressed case, at 0 width: its red is
    # the status and score text), and three grey baseline bars at full length.
    assert colours[GREY] > 3 * 400 * 4
    assert colours[GREEN] > 2 * 400 * 8
    assert colours[RED] > 0
