"""Does an answer speak the conversation's language? Its script against the region's, and for
Latin-script languages the function words each one is made of (no model: a few words suffice)."""

from __future__ import annotations

import re
from collections import Counter

# The turns as the summary request writes them (summarizers/openai.py turn_header), each header at a
# line's start: checked apart, as a "^" would keep re from its fast search for the literal opening.
TURN = re.compile(r"### Turn \d+ \((\w+)\)\n")
# Characters of the region's own turns judged: a language shows in a few thousand, and the region's
# prose is read for every answer (the whole of it took ~60% of the checks' time).
PROSE_SAMPLE = 6000
SAMPLE_POINTS = 16  # turns it is taken from, at most
# Text no language speaks: tool calls and their answers, code blocks, inline code, paths and names.
NOT_PROSE = re.compile(
    r"<tool_call>.*?</tool_call>|<tool_response>.*?</tool_response>|```.*?```|`[^`\n]*`|\S*[/_=\\]\S*",
    re.S,
)
SCRIPTS = (
    ("han", "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"),
    ("kana", "\u3040-\u30ff"),
    ("hangul", "\u1100-\u11ff\uac00-\ud7af"),
    ("cyrillic", "\u0400-\u04ff"),
    ("greek", "\u0370-\u03ff"),
    ("arabic", "\u0600-\u06ff"),
    ("hebrew", "\u0590-\u05ff"),
    ("devanagari", "\u0900-\u097f"),
    ("thai", "\u0e00-\u0e7f"),
    ("latin", "A-Za-z\u00c0-\u024f"),
)
# Characters of scripts written without spaces: each one is a unit (a "word") of its own, so
# measures by units mean the same in Chinese, Japanese or Thai as in space-separated languages.
_SPACELESS = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
UNIT = re.compile(rf"[{_SPACELESS}]|[^\W{_SPACELESS}]+")
SPACELESS = re.compile(f"[{_SPACELESS}]")
ASCII_LETTER = re.compile("[A-Za-z]")
_SCRIPT = {name: re.compile(f"[{chars}]+") for name, chars in SCRIPTS}  # runs: far fewer matches than letters
# One character of a script written without spaces carries about a word: it weighs like one.
WEIGHT = {"han": 3, "kana": 2, "thai": 2}

# Words frequent in one language and in no other listed here (shared ones are left out).
FUNCTION_WORDS = {
    "en": "the and of to is was that for with it on this from are were be has have not which after its",
    "es": "el los las del y en un una por con para es se su al lo como más pero fue ha sus entre",
    "fr": "le les des du et est une qui dans pour par sur pas au aux avec ce cette sont été puis",
    "de": "der die das und ist nicht ein eine zu mit von dem des auf für im sich auch wird wurde nach",
    "pt": "os do da dos das em um uma não foi ao pelo pela com seu sua",
    "it": "il gli della che di è per sono nel alla dei delle anche",
}
_OWNER: dict[str, str] = {}
for _lang, _words in FUNCTION_WORDS.items():
    for _word in _words.split():
        _OWNER[_word] = "" if _word in _OWNER and _OWNER[_word] != _lang else _lang
LATIN_WORD = re.compile(r"[a-zà-ɏ]+")
MIN_WORDS = 8  # function words before a text's Latin language is taken as known
MIN_RATE = 0.15  # of its Latin words: below this a text is lists and names, not prose
MARGIN = 2.0  # the first language's function words against the second's


def units(text: str) -> list[str]:
    """Words, with every character of a script written without spaces a word of its own."""
    return UNIT.findall(text.lower())


def words(text: str) -> float:
    """About how many words the text holds: its units, a character of a script written without spaces
    counting as half of one (the same refusal takes 1.4 to 1.7 Chinese and 2.2 to 2.9 Japanese
    characters per English word, tests/fixtures/refusals.json)."""
    return len(units(text)) - len(SPACELESS.findall(text)) / 2


def region_prose(user: str) -> str:
    """What the region's people wrote, a sample of PROSE_SAMPLE characters at most: its user and
    assistant turns, evenly spread, without code, calls or tool output."""
    heads = [m for m in TURN.finditer(user) if m.start() == 0 or user[m.start() - 1] == "\n"]
    if not heads:
        return NOT_PROSE.sub(" ", _head(user, PROSE_SAMPLE))
    ends = [m.start() for m in heads[1:]] + [len(user)]
    turns = [user[m.end():end] for m, end in zip(heads, ends) if m.group(1) in ("human", "gpt")]
    return NOT_PROSE.sub(" ", "\n".join(_spread(turns, PROSE_SAMPLE)))


def _spread(texts: list[str], budget: int) -> list[str]:
    """About `budget` characters of `texts`: all when they fit, else the texts that SAMPLE_POINTS points evenly
    spaced over their characters fall in, each cut to its share (by characters, not every k-th text: a
    conversation's turns alternate, and every k-th could be only the user's "go on")."""
    total = sum(map(len, texts))
    if total <= budget:
        return texts
    stride = total / SAMPLE_POINTS
    sample, point, start = [], stride / 2, 0
    for text in texts:
        start += len(text)
        if point < start:
            sample.append(text)
            while point < start:
                point += stride
    return [_head(text, budget // len(sample) - 1) for text in sample]  # - 1: the line break joining them


def _head(text: str, n: int) -> str:
    """The first `n` characters, without a code block or call the cut leaves open (it would read as prose)."""
    if len(text) <= n:
        return text
    head = text[:n]
    for opening, closing in (("```", "```"), ("<tool_call>", "</tool_call>"), ("<tool_response>", "</tool_response>")):
        start = head.rfind(opening)
        if start >= 0 and head.find(closing, start + len(opening)) < 0:
            head = head[:start]
    return head


def scripts(text: str) -> dict[str, float]:
    """Each script's share of the text's letters, a spaceless script's characters weighed as words."""
    if text.isascii():  # most regions and answers: only Latin letters can be there, and one scan says if any are
        return {"latin": 1.0} if ASCII_LETTER.search(text) else {}
    counts = {name: sum(map(len, p.findall(text))) * WEIGHT.get(name, 1) for name, p in _SCRIPT.items()}
    total = sum(counts.values())
    return {name: c / total for name, c in counts.items() if c} if total else {}


def latin_language(text: str) -> str | None:
    """The Latin-script language whose function words `text` is made of, None when not clear."""
    words = LATIN_WORD.findall(text.lower())
    hits = Counter(_OWNER[w] for w in words if _OWNER.get(w))
    if not hits:
        return None
    (first, n), *rest = hits.most_common(2)
    second = rest[0][1] if rest else 0
    if n < MIN_WORDS or sum(hits.values()) < MIN_RATE * len(words) or n < MARGIN * second:
        return None
    return first


def matches(answer: str, region: str, min_share: float) -> bool:
    """False when the answer is written in a script the region hardly uses, or the region in a script
    the answer leaves out for prose of its own, or in another Latin-script language than the region's."""
    prose = NOT_PROSE.sub(" ", answer)
    theirs, ours = scripts(region), scripts(prose)
    if not ours or not theirs:
        return True  # nothing to judge by: numbers, names, or a region of tool output only
    main = max(ours, key=ours.get)
    # Latin letters are in every conversation's code and names: they alone say nothing of its language.
    if main != "latin" and theirs.get(main, 0.0) < min_share:
        return False
    region_main = max(theirs, key=theirs.get)
    if region_main != "latin" and theirs[region_main] >= 0.5 and ours.get(region_main, 0.0) < min_share:
        return latin_language(prose) is None  # prose of its own in another script: another language
    if main == "latin" and region_main == "latin":
        spoken, asked = latin_language(prose), latin_language(region)
        return spoken is None or asked is None or spoken == asked
    return True
