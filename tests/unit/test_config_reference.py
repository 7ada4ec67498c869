from pathlib import Path

from exo_common.config_reference import render


def test_config_reference_doc_is_generated_from_the_schema():
    doc = Path(__file__).parents[2] / "docs" / "config-reference.md"
    assert doc.read_text() == render(), "run: .venv/bin/exo config reference > docs/config-reference.md"


def test_every_option_has_help():
    for line in render().splitlines():
        if line.startswith("| `"):
            assert line.rstrip().split("|")[-2].strip(), f"option without help: {line}"
