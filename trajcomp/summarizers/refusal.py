"""Is a model's answer a refusal? Either mostly sentences that open as a refusal or an apology, or a
refusal paragraph: it opens with one and goes on only as long as reasons and offers of other help
take. The summary prompts ask for the third person with no preamble, so a summary never opens in
the model's own voice declining; it may report or quote a refusal, which this tells apart."""

from __future__ import annotations

import re

from .language import words

# Typographic apostrophes and quotes as ASCII ones, so "I’m sorry" reads as "I'm sorry".
_TYPOGRAPHIC = str.maketrans({
    "\u2019": "'", "\u2018": "'", "\u201b": "'", "\u02bc": "'", "\u2032": "'", "\uff07": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u00ab": '"', "\u00bb": '"', "\uff02": '"',
    "\u00a0": " ", "\u202f": " ", "\u3000": " ",
})
QUOTES = "\"'\u300c\u300e"  # after normalizing: a sentence opening with one quotes someone else

# What a refusal may open with before it declines ("Unfortunately I am not able to...").
HEDGES = (
    r"unfortunately", r"regrettably", r"i'?m afraid( that)?", r"i am afraid( that)?",
    r"lamentablemente", r"desafortunadamente", r"me temo que", r"infelizmente", r"malheureusement",
    r"leider", r"purtroppo", r"к сожалению", r"увы", r"很遗憾", r"遗憾的是", r"不好意思", r"残念ながら",
    r"恐れ入りますが", r"유감스럽게도", r"안타깝게도",
)
REFUSAL_PATTERNS = (
    # English
    r"i'?m sorry\b", r"i am sorry\b", r"sorry, (but )?i\b", r"sorry, but\b", r"i apologi[sz]e\b",
    r"(my )?apologies\b",
    r"i (can(no|')t|can not|am unable to|'m unable to|am not able to|'m not able to|won'?t|will not) "
    r"(help|assist|provide|do|comply|summari[sz]e|fulfil|create|write|share|support|produce|generate"
    r"|condense|process|complete|continue|engage)",
    r"as an ai\b", r"i (must|have to|need to) (decline|refuse)\b",
    r"i (do not|don'?t) (feel comfortable|think i (can|should))",
    # Spanish, Portuguese, French, German, Italian
    r"lo siento\b", r"no puedo\b", r"no me es posible\b", r"lamento\b", r"desculpe\b", r"sinto muito\b",
    r"n[ãa]o posso\b", r"n[ãa]o consigo (ajudar|fornecer|resumir)",
    r"je suis d[ée]sol[ée]", r"d[ée]sol[ée],", r"je ne (peux|puis|pourrai) pas\b", r"je dois refuser\b",
    r"es tut mir leid", r"entschuldigung\b", r"ich bedaure\b", r"ich kann (\w+ ){0,4}?(nicht|keine)\b",
    r"kann ich (\w+ ){0,4}?(nicht|keine)\b",
    r"mi dispiace\b", r"non posso\b", r"non sono in grado\b",
    # Russian
    r"извините", r"простите", r"я не (могу|в состоянии|буду)\b", r"не могу (помочь|предоставить|выполнить)",
    # Chinese, Japanese, Korean
    r"(很|非常|十分)?抱歉", r"对不起", r"我(无法|不能|没法|不便|不可以)", r"恕我(无法|不能)",
    r"作为(一个)?(ai|人工智能)",
    # (a declining verb in the present, within the sentence's first words: "...できませんでした" reports)
    r"申し訳", r"すみません",
    r"\S{0,20}?(お手伝い|お答え|お応え|要約|対応|協力|提供|支援)\S{0,8}?(できません|できかねます|いたしかねます)(?!でした)",
    r"죄송", r"미안", r"(이\s\S+\s)?(도와|도움|요약|제공|지원)[^\s.]*(\s드릴)?\s수\s없",
)
REFUSAL = re.compile(
    rf"^[^\w{QUOTES}]*((" + "|".join(HEDGES) + r")[\s,，、:]*)?(" + "|".join(REFUSAL_PATTERNS) + ")", re.I)
SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
# A refusal with its reasons and offers of other help is a short paragraph (the longest of
# tests/fixtures/refusals.json is 68 words); a summary that opened so and went on would be longer.
PARAGRAPH_WORDS = 160


def plain(text: str) -> str:
    """The text with typographic apostrophes and quotes made ASCII and, when quotes wrap all of it, unwrapped."""
    text = text.translate(_TYPOGRAPHIC).strip()
    if len(text) > 1 and text[0] == text[-1] == '"' and '"' not in text[1:-1]:
        return text[1:-1].strip()
    return text


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.findall(plain(text)) if s.strip()]


def refusal_share(text: str) -> float:
    """The share of the answer's characters in sentences that open as a refusal or an apology."""
    found = sentences(text)
    total = sum(len(s) for s in found)
    return sum(len(s) for s in found if REFUSAL.match(s)) / total if total else 0.0


def opens_refusing(text: str) -> bool:
    """The answer's first sentence (after any label line such as "Summary:") is a refusal or an apology."""
    found = [s for s in sentences(text) if not s.endswith((":", "："))]
    return bool(found) and REFUSAL.match(found[0]) is not None


def is_refusal(text: str, max_share: float) -> bool:
    """Mostly refusal sentences, or a refusal paragraph: opens refusing, short as one."""
    if refusal_share(text) >= max_share:
        return True
    return opens_refusing(text) and words(text) <= PARAGRAPH_WORDS
