"""The README is a front door: short, and every link in it leads to a file of the repository."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = ("guides/learners.md", "guides/instructors.md", "guides/authors.md", "guides/models.md")


def links(text):
    """Markdown link targets, and those of <...> autolinks."""
    return re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"<(https?://[^>]+)>", text)


def test_the_readme_is_under_8_kb():
    size = len(README.read_bytes())
    assert size < 8 * 1024, f"README.md is {size} bytes: the details belong in the guides (guides/)"


def test_each_link_of_the_readme_resolves_to_a_file_in_the_repository():
    targets = links(README.read_text(encoding="utf-8"))
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links to no file"
    for target in local:
        path = target.split("#")[0]
        assert path and (ROOT / path).is_file(), f"README.md links to {target!r}, which is not a file here"
    for target in targets:
        if re.match(r"[a-z]+://", target):  # only the local preview server: nothing that may not exist
            assert target.startswith("http://127.0.0.1"), f"README.md links outside the repository: {target}"


def test_the_readme_links_each_guide_and_each_guide_is_a_page_of_the_book():
    targets = links(README.read_text(encoding="utf-8"))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    for guide in GUIDES:
        assert guide in targets, f"the README does not link to {guide}"
        assert guide.removesuffix(".md") in files, f"{guide} is not in _toc.yml"


def test_the_course_edition_copies_the_guides():
    from pm_course.steps.book import KEEP

    assert "guides" in KEEP


def _commands(text):
    """The ``pm-course`` commands of a text's bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [" ".join(line.split("#")[0].split()) for line in lines if line.startswith("pm-course")]


def test_the_readmes_course_commands_are_the_instructors_guides():
    """The README's sketch of a term is a few of the guide's commands, which the course tests run."""
    readme = _commands(README.read_text(encoding="utf-8"))
    guide = _commands((ROOT / "guides/instructors.md").read_text(encoding="utf-8"))
    assert len(readme) >= 5, readme
    missing = [c for c in readme if c not in guide]
    assert not missing, f"the README shows pm-course commands the instructors' guide (and its test) does not: {missing}"
