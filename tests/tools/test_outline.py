"""How a long file is shown to a model: its outline, the definitions wanted whole, and, for one too long
for the budget, the lines of it that the task's words point at."""

from __future__ import annotations

from tools.outline import excerpt, outline, words_of


def long_function() -> str:
    lines = [
        "def render(rows, align='left'):",
        '    """Render rows.',
        "",
        "    >>> render([['spam']], align='decimal')",
    ]
    lines += ["    'spam'", '    """']
    lines += [f"    step_{i} = rows[{i}] if rows else None" for i in range(300)]
    lines += ["    numalign = 'decimal' if align == 'left' else align", "    return numalign"]
    return "\n".join(lines) + "\n"


def test_a_definition_too_long_for_the_budget_shows_the_code_lines_the_task_points_at_not_its_docstring():
    text = long_function()
    [d] = outline("render.py", text)
    shown, names = excerpt(
        "render.py",
        text,
        [d],
        3000,
        "render.py is long.",
        words=set(words_of("decimal alignment of numbers")),
    )
    assert "   307      numalign = 'decimal' if align == 'left' else align" in shown
    assert ">>> render" not in shown  # the docstring's example echoes the words; the change is in the code
    assert "     1  def render(rows, align='left'):" in shown
    assert names == []  # not shown whole: it may not be written as a whole definition
