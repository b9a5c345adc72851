"""The plan step of the blocks protocol (opt-in: `plan_first`): where it is on, the model is asked
first where its change goes, and for the blocks once it has said; its answer then is read as that plan,
never applied."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from agent.core.llm import Completion
from agent.core.protocol import ReadAnswer
from agent.protocols.base import stopped_at_limit
from agent.protocols.edit_blocks.parser import Action, ParsedAnswer
from agent.protocols.edit_blocks.project import TaskProgress
from agent.protocols.edit_blocks.prompt import (
    APPLY_PLAN,
    BLOCKS_REMINDER,
    BLOCKS_REMINDER_NAMED,
    EXAMPLE_PATH,
    PLAN_TOKENS,
)
from agent.protocols.edit_blocks.repairs import AnswerRepairs, split_fences

# A file name in prose: `report.py`, src/app.ts (not `e.g.` or `os.getcwd`, by the suffix).
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z]{1,4})(?![\w])")
SOURCE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".rb", ".sh", ".md"}
)
MAX_NAMED = 3  # files named in the request for the blocks after a plan; more are not a plan of one change
# What the blocks reader says of code that is a sketch in a plan, not a block meant to be applied.
PLAN_SKETCHES = (
    "without a file path",
    "holds only a path",
    "the same text in SEARCH and REPLACE",
    "an empty ```",
)


class PlanStep:
    """Whether a plan is asked for first, whether the next answer is that plan, and what asks for the
    blocks once it is given."""

    def __init__(self, progress: TaskProgress, repairs: AnswerRepairs) -> None:
        self.progress = progress
        self.repairs = repairs
        self.enabled = False  # the `plan_first` setting, or a profile's
        self.awaited = False  # the next answer is the plan asked for, not yet the blocks
        self.after_plan = BLOCKS_REMINDER  # what asks for the blocks once the plan is given

    def ask(self, plan_ask: str, blocks_ask: str) -> str:
        """What to ask for now. With the plan step on, the plan (`plan_ask`): the next answer is read
        as that plan, and `blocks_ask` asks for the blocks after it; else the blocks at once."""
        if not self.enabled:
            return blocks_ask
        self.awaited, self.after_plan = True, blocks_ask
        return plan_ask

    def request_overrides(self) -> dict[str, Any]:
        return {"max_tokens": PLAN_TOKENS} if self.awaited else {}

    def take(self, parsed: ParsedAnswer, actions: list[Action], completion: Completion) -> ReadAnswer | None:
        """The answer read as a step of the plan: the plan asked for (nothing applied, the blocks asked
        for next), or the plan given again once the change is made (taken as done); None when it is
        blocks to apply. Either way, the answer after it is read as blocks."""
        awaited, self.awaited = self.awaited, False
        if awaited and is_plan(parsed, actions, completion):
            # The plan asked for: its code (a line quoted, a fix sketched, the file copied as it is)
            # is no block to apply, and its commands are what it means to run once the change is
            # made: run before it, a test's output came last and the 1.5B wrote its fix into the
            # data file that output named (cli-flag). A fence labelled `# pricing.py`
            # inside is a sketch too: taken as a write, the sketch of one function replaced the
            # whole file (rename-function). A plan cut at PLAN_TOKENS is a plan. An answer that
            # writes a file under a path line at once, or tries to in a whole answer (a block
            # malformed), or that is only commands, is acting.
            return ReadAnswer([], completion.content, followup=self._blocks_asked(completion.content))
        if self._given_again(parsed, actions, completion):
            why = "the model described its change again after making it: taken as done"
            return ReadAnswer([], completion.content, notice=why)
        return None

    def _blocks_asked(self, plan: str) -> str:
        """What asks for the blocks once the plan is given, naming the files to write: the source files
        the plan names (else those changed, else those the task names). Told only the format after its
        plan, the 1.5B wrote the format's example, `path/to/example.py`, four times in one task
        (csv-totals): the path it is shown is the path it writes. Data files are
        not named: told to write the sales.csv its task reads, it wrote it back."""
        files = (
            self._sources_named(plan)
            or [rel for rel in self.progress.changed if PurePosixPath(rel).suffix in SOURCE_SUFFIXES]
            or self._sources_named(self.progress.task)
        )
        if self.after_plan != BLOCKS_REMINDER or not 1 <= len(files) <= MAX_NAMED:
            return APPLY_PLAN.format(reminder=self.after_plan)
        return APPLY_PLAN.format(reminder=BLOCKS_REMINDER_NAMED.format(files=" and ".join(files)))

    def _given_again(self, parsed: ParsedAnswer, actions: list[Action], completion: Completion) -> bool:
        """Whether, the change made and not yet judged, the answer is a plan again, sketches and all.
        The 1.5B gives its plan again nearly word for word once it has written the change; refused for
        its pathless sketches, it gave the same answer until the repeat guard ended the task, and no
        check round came (cli-flag and dataclass-field). It is telling what it
        did: the check judges the change. Commands with prose and no sketch are run as ever."""
        settled = self.progress.changed and not self.progress.failed
        return bool(self.enabled and settled and parsed.problems and is_plan(parsed, actions, completion))

    def _sources_named(self, text: str) -> list[str]:
        """The source files `text` names, new ones too, as paths of the project where they are its
        files, in the order named; and the existing ones whose definitions it rewrites."""
        names = [name for name in _FILE_NAME.findall(text) if name != EXAMPLE_PATH]
        named = [self.repairs.known_path(Action("write", name, "")).path for name in names]
        found = [*named, *self.repairs.named_files(text)]
        return [rel for rel in dict.fromkeys(found) if PurePosixPath(rel).suffix in SOURCE_SUFFIXES]


def is_plan(parsed: ParsedAnswer, actions: list[Action], completion: Completion) -> bool:
    """Whether an answer to the plan asked for is that plan: no file written under a path line, no
    block tried and malformed (unless the cap cut it), and not commands alone."""
    if any(a.path and not a.labelled for a in actions if a.kind != "bash"):
        return False
    sketches_only = all(any(n in p for n in PLAN_SKETCHES) for p in parsed.problems)
    if not (sketches_only or stopped_at_limit(completion)):
        return False
    commands_only = all(a.kind == "bash" for a in actions) and not split_fences(completion.content)[0]
    return not (actions and commands_only)
