"""docs/configuration.md is what agent/settings/reference.py writes from the settings and profile models,
so the reference cannot drift from what the code accepts."""

from __future__ import annotations

from pathlib import Path

from agent.server.profiles import ServerProfile, Speculative
from agent.settings.config import ENV_FIELDS, Settings
from agent.settings.reference import COMMAND, configuration_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_configuration_page_is_what_the_generator_writes_now():
    assert PAGE.read_text(encoding="utf-8") == configuration_page(), f"run `{COMMAND}` and commit the page"


def test_every_field_a_user_can_write_has_its_line_with_its_description():
    page = configuration_page()
    words = " ".join(page.split())
    for model, skipped in ((Settings, ()), (ServerProfile, ("name", "source")), (Speculative, ())):
        for name, field in model.model_fields.items():
            if name in skipped:
                continue
            assert f"- **`{name}`** (" in page, f"{model.__name__}.{name} is not on the page"
            description = " ".join(field.description.split()) if field.description else ""
            for variable in ENV_FIELDS:
                description = description.replace(f" ({variable})", "")  # the page says it among the facts
            assert description in words, f"{model.__name__}.{name}'s description is not on the page"


def test_a_field_says_its_type_bounds_default_and_environment_variable():
    page = configuration_page()
    assert "- **`max_turns`** (integer, at least 1, default `40`)" in page
    assert '- **`profile`** (string, default `"coder-ngram"`, environment `AGENT_PROFILE`)' in page
    assert (
        '- **`build`** (`"auto"` \\| `"cpu"` \\| `"cuda"`, default `"auto"`, environment `AGENT_BUILD`)'
        in page
    )
