"""The HTML report's tests: a synthetic run (2 prompts x 2 rows, k = 3, h - 1 = 2) and an HTML tree parser."""

from __future__ import annotations

import copy
from html.parser import HTMLParser

SCRIPT = "<script>alert(1)</script>"


def _step(committed, accepted, *, lattice=True, before=None, after=None, chosen=None):
    columns = None
    if lattice:
        columns = [
            [[" the", 0.61], [" a", 0.2], ["\n", 0.05]],
            [[" cat", 0.4], [" dog", 0.35], ["\t&x", 0.1]],
        ]
    return {
        "committed": committed,
        "accepted": accepted,
        "lattice": columns,
        "drafts_before": before,
        "drafts_after": after,
        "chosen": chosen,
    }


def synthetic_run() -> dict:
    """A fresh copy each call (tests may mutate it)."""
    vanilla_steps = [
        _step([" Once"], 0, lattice=False),
        _step([" upon", " the"], 1, before=[[" the", " cat"]], chosen=0),
        _step([" a", " the", " cat"], 2, before=[[" the", " cat"]], chosen=0),
        _step([" time"], 0, before=[[" the", " dog"]], chosen=0),
    ]
    ngram_steps = [
        _step([" Once"], 0, lattice=False),
        _step(
            [" upon", " the", " cat"],
            2,
            before=[[" the", " dog"], [" the", " cat"], [" a", " cat"]],
            after=[[" the", " cat"], [" the", " dog"], [" a", " dog"]],
            chosen=0,
        ),
        _step(
            [" sat", "\n"], 1, before=[["\n", " cat"], [" a", " cat"]], after=[[" a", " dog"], ["\n", " cat"]], chosen=1
        ),
    ]
    return copy.deepcopy(
        {
            "title": "Synthetic decoding run",
            "model": "tiny-test-model",
            "settings": {"k": 3, "p": 3, "alpha": 0.5, "lm": "katz4.dlm"},
            "rows": [
                {
                    "name": "vanilla",
                    "block_efficiency": 1.75,
                    "tokens_per_s": 120.5,
                    "identical": True,
                    "accepted_histogram": {0: 2, 1: 1, 2: 1},
                },
                {
                    "name": "ngram p-best",
                    "block_efficiency": 2.2,
                    "tokens_per_s": 98.0,
                    "identical": None,
                    "accepted_histogram": {"0": 1, "1": 1, "2": 1},
                },
            ],
            "prompts": [
                {
                    "prompt": "In a small village",
                    "runs": {"vanilla": {"steps": vanilla_steps}, "ngram p-best": {"steps": ngram_steps}},
                },
                {
                    "prompt": f"Hostile prompt {SCRIPT} & more",
                    "runs": {
                        "vanilla": {
                            "steps": [
                                _step([SCRIPT], 0, lattice=False),
                                _step([" ok", " the"], 1, before=[[" the", " cat"]], chosen=0),
                            ]
                        },
                        "ngram p-best": {
                            "steps": ngram_steps[:2] + [_step([" x", SCRIPT], 1, after=[[SCRIPT, " y"]], chosen=0)]
                        },
                    },
                },
            ],
            "curves": {
                "oracle_topk": [[1, 1.8], [2, 2.4], [4, 2.9], [8, 3.1]],
                "pbest": [[1, 2.0], [2, 2.2], [4, 2.35]],
            },
        }
    )


class Element:
    """One parsed element: tag, attributes, children, and its text (all descendants' data)."""

    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs, self.children, self.parts = tag, attrs, [], []

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one <{tag} class={cls} {attrs}>, found {len(found)}"
        return found[0]


class _TreeBuilder(HTMLParser):
    VOID = {"meta", "br", "hr", "img", "input", "link", "source", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs))
        self.stack[-1].children.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        for element in self.stack:
            element.parts.append(data)


def parse_html(text: str) -> Element:
    """The document tree; AssertionError on a mismatched end tag (the page must be well nested)."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    assert builder.stack == [builder.root], f"unclosed elements: {[e.tag for e in builder.stack[1:]]}"
    return builder.root
