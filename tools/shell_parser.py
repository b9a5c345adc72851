"""A command line as the shell reads it: the simple commands it runs, each with its real words.

Permissions judge commands one by one, so the line is parsed with tree-sitter's bash grammar (the
grammar editors use), not split on substrings. Every simple command is found wherever it hides: after
`;`, `&&`, `||`, in pipes, subshells, `$(...)`, `<(...)`, braces, loops and conditions, inside the
string given to `bash -c`/`sh -c`/`eval`, and behind wrappers (`sudo`, `env`, `nice`, `timeout`,
`xargs`, `find -exec`...). Words carry their quoting removed; a word built from an expansion at run
time (`$HOME`, `$(cmd)`) is marked dynamic, because nobody can tell where it points before it runs.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath

from tree_sitter import Language, Node, Parser

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "mksh"}
# Operators that write to the file named after them (`2>&1` duplicates a descriptor and is not one).
WRITE_REDIRECTS = {">", ">>", "&>", "&>>", ">|", "<>"}
# Wrappers that run the command after them; each maps to the options that take a value.
WRAPPERS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"},
    "doas": {"-u", "-C"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir", "--split-string"},
    "nice": {"-n", "--adjustment"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "nohup": set(),
    "time": {"-f", "-o"},
    "command": set(),
    "builtin": set(),
    "exec": {"-a"},
    "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-p", "-t"},
    "setsid": set(),
    "chrt": set(),
    "unbuffer": set(),
    "xargs": {"-I", "-i", "-n", "-P", "-L", "-l", "-d", "-E", "-e", "-s", "-a", "--max-args", "--max-procs",
              "--delimiter", "--arg-file", "--replace", "--max-lines", "--eof"},
}  # fmt: skip
ELEVATING = {"sudo", "doas"}


@dataclass
class Word:
    text: str
    dynamic: bool = False  # contains an expansion: its value is only known when it runs


@dataclass
class SimpleCommand:
    words: list[Word]
    wrappers: list[str] = field(default_factory=list)  # sudo, env, xargs... in the order they wrap
    writes: list[Word] = field(default_factory=list)  # files its redirections write
    stdin_from: list[SimpleCommand] = field(default_factory=list)  # the pipe stage before it
    substituted: list[SimpleCommand] = field(default_factory=list)  # what its <(...) arguments run
    cwd: str | None = None  # where a `cd` earlier on the line left it (None: where the line started)
    extra_args: bool = False  # xargs or find -exec appends arguments nobody can see
    source: str = ""  # the line this command was read from, for nested ones (`bash -c '...'`)

    @property
    def name(self) -> str:
        return PurePosixPath(self.words[0].text).name if self.words else ""

    @property
    def args(self) -> list[Word]:
        return self.words[1:]

    @property
    def elevated(self) -> bool:
        return any(w in ELEVATING for w in self.wrappers)

    @property
    def text(self) -> str:
        """The command as rules see it: its words, wrappers dropped (`sudo` is judged on its own)."""
        return " ".join(w.text for w in self.words)

    @property
    def full_text(self) -> str:
        return " ".join([*self.wrappers, self.text]) if self.wrappers else self.text


@dataclass
class ParsedLine:
    commands: list[SimpleCommand]
    unreadable: str = ""  # why the line could not be read; such a line is never trusted
    opaque: list[str] = field(default_factory=list)  # code it runs that cannot be seen (`eval "$x"`)


@cache
def _parser() -> Parser:
    import tree_sitter_bash

    return Parser(Language(tree_sitter_bash.language()))


def parse(line: str, depth: int = 0) -> ParsedLine:
    tree = _parser().parse(line.encode())
    if tree.root_node.has_error:
        return ParsedLine([], "the shell cannot read it (unbalanced quotes or brackets?)")
    reader = _Reader(line, depth)
    reader.commands_of(tree.root_node)
    return ParsedLine(reader.found, reader.unreadable, reader.opaque)


class _Reader:
    def __init__(self, line: str, depth: int) -> None:
        self.line = line
        self.depth = depth
        self.found: list[SimpleCommand] = []
        self.unreadable = ""
        self.opaque: list[str] = []
        self.cwd: str | None = None

    def commands_of(self, node: Node) -> list[SimpleCommand]:
        """Every simple command under `node`, in the order they appear (also collected in .found)."""
        kind = node.type
        if kind == "command":
            return self._command(node)
        if kind == "pipeline":
            stages = [self.commands_of(child) for child in node.named_children]
            for before, stage in itertools.pairwise(stages):
                if stage and before:
                    stage[0].stdin_from = before
            return [c for stage in stages for c in stage]
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            commands = self.commands_of(body) if body is not None else []
            for redirect in node.children_by_field_name("redirect"):
                if target := self._written(redirect):
                    for command in commands:
                        command.writes.append(target)
                commands += self.commands_of(redirect)
            return commands
        if kind in ("heredoc_body", "comment"):
            return []
        commands = []
        for child in node.named_children:
            commands += self.commands_of(child)
        return commands

    def _written(self, redirect: Node) -> Word | None:
        if redirect.type != "file_redirect":
            return None
        operator = next((c.type for c in redirect.children if not c.is_named), "")
        destination = redirect.child_by_field_name("destination")
        if operator not in WRITE_REDIRECTS or destination is None:
            return None
        if destination.type == "number" and operator != ">":  # `>&2`-like duplications are parsed so
            return None
        return self.word(destination)

    def _command(self, node: Node) -> list[SimpleCommand]:
        words: list[Word] = []
        nested: list[SimpleCommand] = []
        substituted: list[SimpleCommand] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                nested += self.commands_of(child)  # X=$(cmd) runs cmd
                continue
            if child.type == "file_redirect":
                continue  # handled where the grammar puts it, on the redirected statement
            words.append(self.word(child))
            for inner in _substitutions(child):
                ran = self.commands_of(inner)
                (substituted if inner.type == "process_substitution" else nested).extend(ran)
        command = SimpleCommand(words, substituted=substituted, cwd=self.cwd)
        commands = [command, *nested]
        self.found.append(command)
        self._unwrap(command)
        self._follow(command)
        return commands

    def word(self, node: Node) -> Word:
        text = node.text.decode(errors="replace")
        kind = node.type
        if kind == "raw_string":
            return Word(text[1:-1])
        if kind == "ansi_c_string":
            return Word(text[2:-1])
        if kind in ("word", "command_name", "number"):
            if kind == "command_name" and node.named_children:
                return self.word(node.named_children[0])
            return Word(re.sub(r"\\(.)", r"\1", text))
        if kind == "string":
            parts, dynamic = [], False
            for child in node.named_children:
                if child.type == "string_content":
                    parts.append(re.sub(r'\\([$`"\\\n])', r"\1", child.text.decode(errors="replace")))
                else:
                    dynamic = True
                    parts.append(child.text.decode(errors="replace"))
            return Word("".join(parts), dynamic)
        if kind == "concatenation":
            parts = [self.word(child) for child in node.named_children]
            return Word("".join(p.text for p in parts), any(p.dynamic for p in parts))
        # $VAR, ${VAR}, $(cmd), `cmd`, $((1+1)), <(cmd), {a,b}, globs: only known when it runs
        return Word(text, dynamic=kind not in ("brace_expression",))

    def _unwrap(self, command: SimpleCommand) -> None:
        """`sudo -u x env A=1 nice -n 5 rm -rf /` is `rm -rf /`, run by three wrappers."""
        words = command.words
        while words and (name := PurePosixPath(words[0].text).name) in WRAPPERS:
            if name == "command" and len(words) > 1 and words[1].text in ("-v", "-V"):
                break  # `command -v x` looks x up; it runs nothing
            takes_value = WRAPPERS[name]
            i = 1
            while i < len(words):
                option = words[i].text
                if name == "env" and "=" in option and not option.startswith("-"):
                    i += 1
                elif option == "--":
                    i += 1
                    break
                elif option.startswith("-") and len(option) > 1:
                    if name == "env" and option.split("=")[0] in ("-S", "--split-string"):
                        value = option.split("=", 1)[1] if "=" in option else _at(words, i + 1)
                        self._nested(value, command)  # env -S "a b" runs the line "a b"
                    i += 2 if option in takes_value else 1
                elif name == "timeout" and re.match(r"^\d", option):
                    i += 1  # the duration
                    break
                else:
                    break
            command.wrappers.append(name)
            if name == "xargs":
                command.extra_args = True
            words = words[i:]
        command.words = words
        if not words:  # a bare `xargs` runs echo; a bare `sudo` does nothing
            command.words = [Word("echo")] if command.wrappers[-1:] == ["xargs"] else []

    def _follow(self, command: SimpleCommand) -> None:
        """Code a command runs that is written in its arguments: `bash -c`, `eval`, `find -exec`, `cd`."""
        name, args = command.name, command.args
        if name in SHELLS:
            for i, arg in enumerate(args):
                if re.match(r"^-[a-zA-Z]*c[a-zA-Z]*$", arg.text):
                    self._nested(_at(args, i + 1), command)
                    break
                if not arg.text.startswith("-"):
                    break  # a script file: it runs, as a program does
        elif name == "eval":
            self._nested(Word(" ".join(a.text for a in args), any(a.dynamic for a in args)), command)
        elif name == "find":
            starts = []
            for arg in args:
                if arg.text.startswith(("-", "(", "!")):
                    break
                starts.append(arg)
            for i, arg in enumerate(args):
                if arg.text in ("-exec", "-execdir", "-ok", "-okdir"):
                    end = next((j for j in range(i + 1, len(args)) if args[j].text in (";", "+")), len(args))
                    ran = args[i + 1 : end]
                    # {} stands for each path found: what is under the starting points
                    ran = [w2 for w in ran for w2 in (starts or [Word(".")] if w.text == "{}" else [w])]
                    if ran:
                        inner = SimpleCommand(ran, cwd=self.cwd, extra_args=True, source=command.text)
                        self.found.append(inner)
                        self._unwrap(inner)
                        self._follow(inner)
        elif name == "cd":
            target = next((a for a in args if not a.text.startswith("-")), Word("~"))
            self.cwd = target.text if not target.dynamic else "$?"

    def _nested(self, script: Word | None, outer: SimpleCommand) -> None:
        if script is None:
            return
        if script.dynamic:
            self.opaque.append(f"{outer.name} runs {script.text!r}, known only when it runs")
            return
        if self.depth >= 4:
            self.unreadable = "commands nested too deep to read"
            return
        inner = parse(script.text, self.depth + 1)
        if inner.unreadable:
            self.unreadable = f"the script given to {outer.name}: {inner.unreadable}"
        self.opaque += inner.opaque
        for command in inner.commands:
            command.source = script.text
            command.cwd = command.cwd or self.cwd
            command.wrappers = [*outer.wrappers, *command.wrappers]
            command.stdin_from = command.stdin_from or outer.stdin_from
        self.found += inner.commands


def _at(words: list[Word], i: int) -> Word | None:
    return words[i] if i < len(words) else None


def _substitutions(node: Node) -> list[Node]:
    """The $(...), `...` and <(...) inside one word, outermost first."""
    if node.type in ("command_substitution", "process_substitution"):
        return [node]
    found = []
    for child in node.named_children:
        found += _substitutions(child)
    return found
