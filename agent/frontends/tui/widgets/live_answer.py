"""The part of an answer still streaming, drawn at a cost per frame of about what arrived in it.

Textual's Markdown widget mounts a widget per block and parses and styles the last block again on
every write: a code block being written is highlighted again, whole, each frame, and at 2,000 tokens
a second the screen fell seconds behind. Here the complete blocks are rendered by Rich's Markdown,
as the finished answer looks, at most every SETTLE_S and after the frame that completed them is
drawn; the block being written after them is plain text, wrapped one source line at a time and kept,
so only the line being written is wrapped again. Lines are drawn through the line API: the layout
asks only for a height.

The conversation hands each ~4k of complete blocks, and the finished answer, to a Static as a past
answer, with the lines already rendered (`RenderedOnce`).
"""

from __future__ import annotations

import time

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

SETTLE_S = 0.3  # complete blocks are rendered as Markdown at most this often (~3 ms + 2.5 ms/KB)


class RenderedOnce:
    """Rich Markdown rendered once per width: a Static renders its content for its height, then again
    for its lines, and Markdown with highlighted code is the costliest thing on the screen."""

    def __init__(self, markdown: str, width: int = -1, lines: list[list[Segment]] | None = None) -> None:
        self.markdown = markdown
        self._width = width
        self._segments = [s for line in lines or [] for s in (*line, Segment.line())]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width != self._width:
            self._segments = list(console.render(RichMarkdown(self.markdown), options))
            self._width = options.max_width
        return self._segments


class LiveAnswer(Widget):
    DEFAULT_CSS = "LiveAnswer { height: auto; }"

    def __init__(self, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.source = ""
        self._settled = 0  # source[:_settled] is rendered as Markdown
        self._lines: list[list[Segment]] = []  # ...in these lines, at _width
        self._markdown: list[Strip] = []
        self._wrapped = 0  # source[_settled:_wrapped] is whole lines, wrapped in _plain
        self._plain: list[Strip] = []
        self._writing: list[Strip] = []  # the line still being written
        self._width = 0
        self._scanned = 0  # source[:_scanned] was read for block starts
        self._fence: tuple[str, int] | None = None  # the open code fence's character and length
        self._blank = False  # the last line read was blank
        self._block_start = 0  # where the newest complete top-level block ends
        self._settled_at = 0.0
        self._settle_due = False

    @property
    def settled(self) -> str:
        """The complete blocks: what is shown as Markdown."""
        return self.source[: self._settled]

    def write(self, text: str) -> None:
        rows = self._rows
        changed = rows - len(self._writing)  # the rows above stay as they are
        self.source += text
        self._read_blocks()
        if self._width:
            self._wrap_plain()
        if self._rows != rows:
            self.refresh(layout=True)
        else:  # the line being written grew: at a local model's pace, most frames
            self.refresh(Region(0, changed, self._width, rows - changed))
        if (
            not self._settle_due
            and self._block_start > self._settled
            and time.monotonic() - self._settled_at >= SETTLE_S
        ):
            # After this frame is drawn: its text shows first, plain, and the render (10-25 ms)
            # delays no frame's text.
            self._settle_due = True
            self.call_after_refresh(self._settle_blocks)

    def _settle_blocks(self) -> None:
        self._settle_due = False
        if self.is_attached and self._block_start > self._settled:
            self._settle(self._block_start)
            self.refresh(layout=True)

    def finish(self) -> None:
        """Everything as Markdown (for reasoning: its box stays)."""
        self._settle(len(self.source))
        self.refresh(layout=True)

    def take_settled(self) -> RenderedOnce:
        """The complete blocks, rendered, for a past answer; this goes on with the rest."""
        past = RenderedOnce(self.settled, self._width if self._lines else -1, self._lines)
        cut = self._settled
        self.source = self.source[cut:]
        self._settled = 0
        self._wrapped -= cut
        self._scanned -= cut
        self._block_start = max(0, self._block_start - cut)
        self._lines, self._markdown = [], []
        self.refresh(layout=True)
        return past

    def rendered(self) -> RenderedOnce:
        """All of it, for a past answer (rendered here already when nothing follows the blocks)."""
        if self._settled == len(self.source) and self._lines:
            return RenderedOnce(self.source, self._width, self._lines)
        return RenderedOnce(self.source)

    def _read_blocks(self) -> None:
        """Find where the newest top-level block starts: a line after a blank one, outside code,
        not indented (an indented one may continue a list item); or a code fence."""
        source, pos = self.source, self._scanned
        end = source.rfind("\n") + 1  # whole lines only
        while pos < end:
            nl = source.find("\n", pos)
            line = source[pos:nl]
            stripped = line.lstrip(" ")
            indent = len(line) - len(stripped)
            if indent < 4 and stripped[:3] in ("```", "~~~"):
                mark = stripped[0]
                length = len(stripped) - len(stripped.lstrip(mark))
                if self._fence is None:
                    if self._blank or indent == 0:  # a fence may interrupt a paragraph
                        self._block_start = pos
                    self._fence = (mark, length)
                elif mark == self._fence[0] and length >= self._fence[1] and not stripped[length:].strip():
                    self._fence = None
                self._blank = False
            elif self._fence is None:
                if self._blank and indent == 0 and stripped:
                    self._block_start = pos
                self._blank = not stripped
            pos = nl + 1
        self._scanned = max(self._scanned, end)

    def _settle(self, cut: int) -> None:
        """Render source[:cut] as Markdown. (All of it again: a part is at most ~4k, and Rich's
        Markdown then looks exactly as the finished answer will, which hands these lines on.)"""
        self._settled = cut
        self._settled_at = time.monotonic()
        self._render_markdown()
        # The plain text starts again at the cut: only the block being written lies after it.
        self._wrapped, self._plain = cut, []
        if self._width:
            self._wrap_plain()

    def _render_markdown(self) -> None:
        if not self._width or not self.settled.strip():
            self._lines, self._markdown = [], []
            return
        options = self.app.console_options.update(highlight=False, width=self._width)
        self._lines = self.app.console.render_lines(RichMarkdown(self.settled), options, pad=False)
        self._markdown = [Strip(line) for line in self._lines]

    def _wrap_plain(self) -> None:
        end = self.source.rfind("\n") + 1
        if end > self._wrapped:
            self._plain += self._wrap(self.source[self._wrapped : end - 1])
            self._wrapped = end
        last = self.source[self._wrapped :]
        self._writing = self._wrap(last) if last else []

    def _wrap(self, text: str) -> list[Strip]:
        console = self.app.console
        return [Strip(line.render(console), line.cell_len) for line in Text(text).wrap(console, self._width)]

    @property
    def _gap(self) -> list[Strip]:
        """The blank line between the Markdown and the block being written, as between blocks."""
        return [Strip.blank(0)] if self._markdown and (self._plain or self._writing) else []

    @property
    def _rows(self) -> int:
        return len(self._markdown) + len(self._gap) + len(self._plain) + len(self._writing)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._width = width
            self._render_markdown()
            self._wrapped, self._plain, self._writing = self._settled, [], []
            if width:
                self._wrap_plain()
        return self._rows

    def render_line(self, y: int) -> Strip:
        for lines in (self._markdown, self._gap, self._plain, self._writing):
            if y < len(lines):
                return lines[y].apply_style(self.rich_style)
            y -= len(lines)
        return Strip.blank(self.size.width, self.rich_style)
