"""The part of an answer still streaming, drawn at a cost per frame of about what arrived in it.

Textual's Markdown widget mounts a widget per block and parses and styles the last block again on
every write: a code block being written is highlighted again, whole, each frame, and at 2,000 tokens
a second the screen fell seconds behind. Here the blocks that are complete are rendered once, by
Rich's Markdown (as the finished answer looks), at most every SETTLE_S; the text after them is plain,
wrapped one source line at a time and kept, so only the line being written is wrapped again. Lines are
drawn through the line API: the layout asks only for a height.

The conversation shows a finished answer (or a ~4k part of a long one) as a past answer instead.
"""

from __future__ import annotations

import time

from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

SETTLE_S = 0.2  # complete blocks turn into Markdown at most this often (a render costs ~3 ms + 2.5 ms/KB)


class LiveAnswer(Widget):
    DEFAULT_CSS = "LiveAnswer { height: auto; }"

    def __init__(self, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.source = ""
        self._settled = 0  # source[:_settled] is rendered as Markdown, in _markdown
        self._blocks: list[str] = []  # what _markdown was rendered from, for another width
        self._markdown: list[Strip] = []
        self._wrapped = 0  # source[_settled:_wrapped] is whole lines, wrapped in _plain
        self._plain: list[Strip] = []
        self._writing: list[Strip] = []  # the line still being written
        self._width = 0
        self._scanned = 0  # source[:_scanned] was read for block starts
        self._fence: tuple[str, int] | None = None  # the open code fence's character and length
        self._blank = False  # the last line read was blank
        self._block_start = 0  # the newest block that starts after a blank line, outside code
        self._settled_at = 0.0

    @property
    def settled(self) -> str:
        """The answer's complete blocks: what is shown as Markdown."""
        return self.source[: self._settled]

    def write(self, text: str) -> None:
        rows = self._rows
        changed = rows - len(self._writing)  # the rows above stay as they are
        self.source += text
        self._read_blocks()
        if self._block_start > self._settled and time.monotonic() - self._settled_at >= SETTLE_S:
            changed = min(changed, len(self._markdown))
            self._settle(self._block_start)
        if self._width:
            self._wrap_plain()
        if self._rows != rows:
            self.refresh(layout=True)
        else:  # the line being written grew: at a local model's pace, most frames
            self.refresh(Region(0, changed, self._width, rows - changed))

    def finish(self) -> None:
        """Everything as Markdown, rendered as one document (exactly as a finished answer looks)."""
        self._blocks = [self.source] if self.source.strip() else []
        self._settled = self._wrapped = len(self.source)
        self._plain, self._writing = [], []
        self._markdown = self._render_markdown(self._width) if self._width else []
        self.refresh(layout=True)

    def drop_settled(self) -> None:
        """Forget the complete blocks (the conversation shows them as a past answer now)."""
        cut = self._settled
        self.source = self.source[cut:]
        self._settled = 0
        self._wrapped -= cut
        self._scanned -= cut
        self._block_start = max(0, self._block_start - cut)
        self._blocks, self._markdown = [], []
        self.refresh(layout=True)

    def _read_blocks(self) -> None:
        """Find where the newest top-level block starts: a line after a blank one, outside code,
        not indented (an indented one may continue a list item)."""
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
        self._blocks.append(self.source[self._settled : cut])
        if self._width:
            self._markdown += self._render_markdown(
                self._width, self._blocks[-1:], after=bool(self._markdown)
            )
        self._settled = cut
        self._settled_at = time.monotonic()
        # The plain text starts again at the cut: only the block being written lies after it.
        self._wrapped, self._plain = cut, []

    def _render_markdown(
        self, width: int, blocks: list[str] | None = None, after: bool = False
    ) -> list[Strip]:
        """Blocks rendered apart, joined as Rich's Markdown joins blocks: by one blank line."""
        console = self.app.console
        options = self.app.console_options.update(highlight=False, width=width)
        strips: list[Strip] = []
        for markdown in self._blocks if blocks is None else blocks:
            lines = console.render_lines(RichMarkdown(markdown), options, pad=False)
            while lines and _empty(lines[0]):
                lines.pop(0)
            while lines and _empty(lines[-1]):
                lines.pop()
            if lines and (after or strips):
                strips.append(Strip.blank(0))
            strips += [Strip(line) for line in lines]
        return strips

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
        """The blank line between the Markdown and the plain text after it."""
        return [Strip.blank(0)] if self._markdown and (self._plain or self._writing) else []

    @property
    def _rows(self) -> int:
        return len(self._markdown) + len(self._gap) + len(self._plain) + len(self._writing)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._width = width
            self._markdown = self._render_markdown(width) if width else []
            self._wrapped, self._plain = self._settled, []
            if width:
                self._wrap_plain()
        return self._rows

    def render_line(self, y: int) -> Strip:
        for lines in (self._markdown, self._gap, self._plain, self._writing):
            if y < len(lines):
                return lines[y].apply_style(self.rich_style)
            y -= len(lines)
        return Strip.blank(self.size.width, self.rich_style)


def _empty(line: list[Segment]) -> bool:
    """A blank line between blocks (a code block's padding has a background: it is not blank)."""
    return all(not segment.text.strip() and not (segment.style and segment.style.bgcolor) for segment in line)
