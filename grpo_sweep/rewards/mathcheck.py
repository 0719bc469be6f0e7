"""math-verify comparisons with a timeout that works in any thread: they run in a helper process.

math-verify's own timeouts use SIGALRM, which raises outside the main thread (where TRL may call rewards), so
grpo-sweep turns them off. sympy can then spin for minutes on a pathological answer; here the comparison runs
in one persistent helper process, and a comparison that takes longer than ``timeout_s`` gets the helper killed
(a fresh one starts on the next call) and scores 0. ``python -m grpo_sweep.rewards.mathcheck`` is the helper.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import subprocess
import sys
import threading
import time
import unicodedata

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0


# Words, not math: letters (any script) in words separated by spaces/apostrophes/hyphens, at least one run of two
# letters. As LaTeX they would parse as products of single-letter symbols (`Evelyn` == `Evenly`).
_WORDS = re.compile(r"[^\W\d_]+(?:[\s'\u2019-]+[^\W\d_]+)*[.!]?")
_TWO_LETTERS = re.compile(r"[^\W\d_]{2}")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mbox|boxed)\s*\{([^{}]*)\}")
# Zero-width and other invisible format characters: they hide nothing a reader sees, so they count for nothing.
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACES = re.compile(r"\s+")
# A number, optionally with a currency sign before it and words (units) after it: `$18`, `12 apples`, `1,000`.
_NUMBER_WITH_UNITS = re.compile(
    r"(?:\\?\$\s?)?([+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)((?:\s[^\W\d_]{2,}){0,3})\.?", re.ASCII
)
# Words after a number that change or add to it: `12 thousand`, `12 or thirteen` are not 12 with units.
_NOT_UNITS = frozenset(
    "or and to not no plus minus times over divided point squared cubed percent hundred thousand million billion"
    " trillion dozen half halves third thirds quarter quarters one two three four five six seven eight nine ten"
    " eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty"
    " seventy eighty ninety maybe perhaps approximately about roughly nearly almost than".split()
)
# What makes one answer several while math-verify reads one of them (the last part of `11 \\ 12`, `11 \to 12`,
# `11 \lor 12`, `11 \hspace{1em} 12`, `\tag{11} 12`; `\phantom{11}12` shows 12 and reads 23), or is not an
# exact value (`\approx 12`, `\neq`). A line break or `&` is allowed only inside a matrix.
_SEVERAL = re.compile(
    r"\\(?:to|(?:long)?(?:right|left|leftright)arrow|(?:Long)?(?:Right|Left|Leftright)arrow|implies|impliedby|iff"
    r"|mapsto|gets|lor|land|vee|wedge|[hv]space|q?quad|label|tag|[lcvd]?dots|[hv]?phantom|approx|sim|simeq"
    r"|ne|neq|not|newline|boxed|fbox)(?![A-Za-z])"
)
_LINE_BREAK = re.compile(r"\\\\(?![A-Za-z])|&")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_DIGIT_IN_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|operatorname)\s*\{[^{}]*\d[^{}]*\}")
_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# `10,\!000`: the MATH dataset's thousands separator (a comma with its space taken back).
_THOUSANDS_THIN = re.compile(r"(?<=\d),\\!(?=\d{3})")
# A percent after the number or math span it belongs to: `$28$ %`, `28 percent`.
_PERCENT = re.compile(r"^(?:\$([^$]+)\$|([+-]?\d[\d,]*(?:\.\d+)?))\s*(?:\\?%|per\s?cent)\.?$")
# Two numbers with only a space between them: math-verify adds them (`12 13` is 25).
_SPACED_NUMBERS = re.compile(r"\d\s+\.?\d")
# A truth that is a plain number (`12`, `-3`, `1,000`, `2.5`) asks for a value, not for a way to compute one.
_NUMERAL = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?")
# An operation still to be done between two operands: `3 * 4`, `(1 + 2) \cdot 4`, `2^{3}`. A fraction (`24/2`,
# `\frac{1}{2}`) and a sign (`-5`) are ways to write a value, so they are not operations here.
_OPERATION = re.compile(r"[\d)}.]\s*(?:[-+*^\u00d7\u00b7\u00f7]|\\(?:times|cdot|div|pm|mp)(?![A-Za-z]))\s*[\d(\\{.]")


def is_words(truth: str) -> bool:
    """True when ``truth`` is words (``Evelyn``, ``forty two``, ``\\text{no solution}``), not math."""
    bare = _unwrap_text(truth)
    return bool(_WORDS.fullmatch(bare) and _TWO_LETTERS.search(bare))


def normalise_words(text: str) -> str:
    """Compared form of a word answer: invisible characters, markdown emphasis, ``$``, ``\\text{}``/``\\boxed{}``
    wrappers and trailing punctuation dropped, NFKC, casefolded, whitespace collapsed."""
    return (
        _SPACES.sub(" ", unicodedata.normalize("NFKC", _unwrap_text(text)).casefold()).strip().rstrip(".!,;:").strip()
    )


def _unwrap_text(text: str) -> str:
    text = _INVISIBLE.sub("", text).strip()
    while (unwrapped := _EMPHASIS.sub(_emphasised, text)) != text:  # markdown: `**Evelyn**`
        text = unwrapped
    text = text.rstrip(".!,;:").strip().strip("$").strip()  # `$\text{Tuesday}$.`
    while True:
        unwrapped = _TEXT_WRAPPER.sub(r"\1", text).strip()
        if unwrapped == text:
            return text
        text = unwrapped


def _unwrapped(candidate: str) -> str:
    """``candidate`` without invisible characters, with whitespace collapsed and outer ``$…$``/``\\(…\\)``/
    ``\\[…\\]``/``\\boxed{…}`` wrappers removed (any number of them, nested)."""
    text = _SPACES.sub(" ", _INVISIBLE.sub("", candidate)).strip()
    changed = True
    while changed and text:
        changed = False
        for opening, closing in _WRAPPERS:
            if len(text) > len(opening) + len(closing) and text.startswith(opening) and text.endswith(closing):
                text, changed = text[len(opening) : -len(closing)].strip(), True
                break
        else:
            if text.startswith("\\boxed{") and _closing_brace(text, len("\\boxed{") - 1) == len(text) - 1:
                text, changed = text[len("\\boxed{") : -1].strip(), True
    return text


def one_answer(candidate: str) -> str | None:
    """``candidate`` as ONE math answer to parse, or None when it is several or hides part of itself.

    `statement_value` first reads the one value out of the words and markup around it (None when it states several
    or hedges); then invisible characters go, whitespace collapses, outer
    ``$…$``/``\\(…\\)``/``\\[…\\]``/``\\boxed{…}`` wrappers
    are unwrapped, ``,\\!`` between digits becomes ``,`` (``10,\\!000``), a percent sign or word after a number or
    a ``$…$`` span joins it (``$28$ %``, ``28 percent`` -> ``28\\%``), and a number with a currency sign or up to
    three words of units (``$18``, ``\\$16,\\!386.20``, ``12 apples``, ``1,000``) becomes the plain number (not
    when a word changes it: ``12 thousand``, ``12 or thirteen``). None for: a blank answer; another ``$`` or
    ``\\boxed`` left inside; a line break or ``&`` outside a matrix; arrows, ``\\lor``, ``\\tag``, spacing,
    ``\\phantom``, ``\\approx``/``\\neq``; two numbers with only a space between (``12 13``: math-verify reads 25,
    and ``1 000`` is as likely a list as a thousand); a number inside ``\\text{}`` next to a number outside it
    (``12 \\text{ (or 11)}``). Lists and sets (``12, 13``) stay: math-verify parses them as sets, which never
    equal a single value (`compare` splits them itself when the truth has several parts).
    """
    read = statement_value(candidate)
    if read is None:
        return None
    text = _THOUSANDS_THIN.sub(",", _PERCENT.sub(_percent, _unwrapped(read)))
    if not text:
        return None
    number = _NUMBER_WITH_UNITS.fullmatch(text)
    if number and not _NOT_UNITS.intersection(number.group(2).casefold().split()):
        return number.group(1).replace(",", "")
    if _UNESCAPED_DOLLAR.search(text) or _SEVERAL.search(text) or _SPACED_NUMBERS.search(text):
        return None
    if "matrix" not in text and "array" not in text and _LINE_BREAK.search(text):
        return None
    if _DIGIT_IN_TEXT.search(text) and any(ch.isdigit() for ch in _DIGIT_IN_TEXT.sub("", text)):
        return None
    return text


# --- Reading ONE value out of a short sentence or markdown (`statement_value`) ---
# Markdown emphasis and code around any text: `**72**`, `__72__`, `*72*`, `` `72` ``. Not `2**3` (an operand before it).
_EMPHASIS = re.compile(
    "|".join(
        rf"(?<![\w{c}\\])({m})(?=[^\s{c}])(.+?)(?<=[^\s{c}\\]){m}(?![\w{c}])"
        for m, c in ((r"\*\*\*", r"\*"), (r"\*\*", r"\*"), ("__", "_"), (r"\*", r"\*"), ("`{1,3}", "`"))
    )
)


def _emphasised(match: re.Match) -> str:
    return next(match.group(i + 1) for i in range(1, len(match.groups()), 2) if match.group(i) is not None)


_HEADING = re.compile(r"(?m)^[ \t]{0,3}#{1,6}[ \t]+")
_SYMBOLS = str.maketrans(
    {
        "\u2212": "-",
        "\u00d7": " \\times ",
        "\u00f7": " \\div ",
        "\u22c5": " \\cdot ",
        "\u00b7": " \\cdot ",
        "\u03c0": "\\pi ",
    }
)
# Currency signs next to a number: `\$18`, `US\$ 18`, `€18`, `18 €` (an unescaped `$` is decided in `_math_spans`).
_CURRENCY = re.compile(r"\\\$\s?(?=[+-]?\.?\d)|[€£¥₹]\s?(?=[+-]?\.?\d)|(?<=\d)\s?[€£¥₹]")
# The amount is the whole number after it, ending a sentence or not (`$18.`, `$1,234.`): a `.` or `,` followed by a
# digit would be more of the number.
_DOLLAR_CURRENCY = re.compile(
    r"(?:(?<![\\\w$])|(?<![\w])US)\$(?=\s?[+-]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?!\d|[.,]\d|[$\\^_{}]|\s*[=+*/^-]))"
)
_SPAN = re.compile(r"\$\$(.+?)\$\$|\\\((.+?)\\\)|\\\[(.+?)\\\]|(?<!\\)\$((?:[^$\\]|\\.)+?)\$")
_STRAY_DOLLAR = re.compile(r"(?<!\\)\$")
# A word standing alone inside a math span is prose (`$18 and $20` paired as one span `18 and `): `$` were currency.
_PROSE_IN_MATH = re.compile(r"(?:(?<=\s)|^)[A-Za-z]{2,}(?=[\s.,;:!?]|$)")
# `\text{ dollars}` and the like holding words (or nothing) are prose; holding a plain number, that number.
_TEXT_WORDS = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mbox|mathrm|mathbf|mathit|emph)\s*\{"
    r"((?:\s*)|[^{}\d\\$]*[A-Za-z]{2}[^{}\d\\$]*|\s*[+-]?\d[\d,]*(?:\.\d+)?\s*)\}"
)
_THOUSANDS_BRACED = re.compile(r"(?<=\d)\{,\}(?=\d{3})")
_DEGREES = re.compile(r"(?<=[\d}])\s*(?:\^\s*\{?\s*\\circ\s*\}?|\u00b0)")
_UNIT_POWER = re.compile(r"(?<![^\s{])([A-Za-z]{2,})\s*(?:\^\s*\{?\s*[23]\s*\}?|[\u00b2\u00b3])(?![\w])")
_COLON = re.compile(r"(?<=[A-Za-z]):(?=\S)")
# Words that hedge, negate, bound or offer an alternative (`maybe 72`, `72, not 73`, `at least 72`, `72 or so`), and
# words that scale or divide a number (`hundreds`, `twice`, `three fourths`): the statement is not one exact answer.
_HEDGED = re.compile(
    r"(?<![\\A-Za-z])(?:or|not|nor|either|neither|maybe|perhaps|probably|possibly|likely|approx|approximate|approximately"
    r"|about|around|roughly|nearly|almost|estimated?|estimates?|rounded|rounding|nearest|between|unsure|uncertain|guess"
    r"|think|believe|suppose|assume|except|unless|but|wait|instead|alternatively|otherwise|over|under|at\s+(?:least|most)|(?:more|less|fewer|greater)"
    r"\s+than|up\s+to|hundreds|thousands|millions|billions|trillions|dozens?|half|halves|twice|double|triple|thirds?"
    r"|quarters?|(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|hundredth|thousandth|millionth)s?)(?![A-Za-z])",
    re.IGNORECASE,
)
# A number written in words (`eighteen`, `seventy-two`, `one hundred and five`) is the value it names, so it agrees
# with the same value in digits (`18 (eighteen)`) and disagrees with any other (`18 (twenty)`, `72 in three days`).
_SMALL_NUMBERS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
        " seventeen eighteen nineteen".split()
    )
}
_TENS = {
    word: 10 * value for value, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)
}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_NUMBER_WORD_SET = frozenset([*_SMALL_NUMBERS, *_TENS, "hundred", *_SCALES])
_NUMBER_WORD = "|".join(sorted(_NUMBER_WORD_SET, key=len, reverse=True))  # `seventeen` before `seven`
_LETTERS = re.compile(r"[a-z]+")
_NUMBER_WORDS = re.compile(
    rf"(?<![\\\w-])(?:{_NUMBER_WORD})(?:(?:\s*[-\u2010\u2011]\s*|\s+(?:and\s+)?)(?:{_NUMBER_WORD}))*(?![\w-])",
    re.IGNORECASE,
)
# `the one`, `that one`: a pronoun, not the number 1.
_PRONOUN_BEFORE = re.compile(
    r"(?<![A-Za-z])(?:the|this|that|which|each|every|any|no|another|other|right|correct|same|last|first|only)\s+$",
    re.IGNORECASE,
)
_AFTER_NUMBER_WORD = re.compile(rf"(?<![\\A-Za-z])(?:{_NUMBER_WORD})\s*$", re.IGNORECASE)
# `minus 5`, `negative five` state -5, unless an operand comes before (`12 minus 3`: two values).
_SIGN_WORD = re.compile(
    r"(^|[^\w\s.)}\]%]\s*|(?<![\\A-Za-z])[A-Za-z]{2,}\s+)(?:minus|negative)\s+(?=\.?\d)", re.IGNORECASE
)
# A range written with a dash between numbers: `12–13`, `12 — 13`.
_RANGE = re.compile(r"\d\s*[\u2013\u2014]\s*[-+\d.$\\]")
_PERCENT_WORD = re.compile(r"(?:percent|pct|percentage)[.,;:!?]*$", re.IGNORECASE)
_PER_CENT = re.compile(r"\bper\s+cent\b", re.IGNORECASE)
_WORD = re.compile(r"[\"']*[A-Za-z][A-Za-z'\u2019-]*(?:(?<=[A-Za-z]{2})/[A-Za-z]+|(?<=\bm)/s)?[.,;:!?\"']*")
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_OPERATOR_TOKEN = re.compile(r"[=+*/^<>-]+|\\(?:times|cdot|div|pm|mp|le|ge|leq|geq|neq|ne|lt|gt)")
# Single letters that are units after a number (`15 m`); any other single letter next to math is a variable (`12 x`).
_UNIT_LETTERS = frozenset("mgshL")
_ARTICLES = frozenset("aAI")
_COMMAND_END = re.compile(r"\\[A-Za-z]+$")
_TRAILING_PUNCT = re.compile(r"[.,;:!?]+$")
_PLAIN_VALUE = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_LONE_VARIABLE = re.compile(r"[A-Za-z]")
_MARK = "\x00"
_BOUNDARY = "\x01"


def _math_spans(text: str) -> tuple[str, list[str]] | None:
    """``text`` with each ``$…$``/``$$…$$``/``\\(…\\)``/``\\[…\\]`` span replaced by a mark, and their contents;
    None when a ``$`` is left unpaired. A ``$`` before a number reads as a currency sign (``$18``) when pairing the
    ``$`` as math leaves one unpaired or pairs prose (``$18 and $20``)."""

    def pair(attempt: str) -> tuple[str, list[str]] | None:
        contents: list[str] = []

        def mark(match: re.Match) -> str:
            contents.append(next(g for g in match.groups() if g is not None))
            return f" {_MARK}{len(contents) - 1}{_MARK} "

        marked = _SPAN.sub(mark, attempt)
        return None if _STRAY_DOLLAR.search(marked) else (marked, contents)

    as_math = pair(text)
    if as_math is not None and not any(_PROSE_IN_MATH.search(_TEXT_WORDS.sub("", c)) for c in as_math[1]):
        return as_math
    as_currency = _DOLLAR_CURRENCY.sub("", text)
    return (pair(as_currency) if as_currency != text else None) or as_math


def _boxes(text: str, contents: list[str]) -> str | None:
    """``text`` with each top-level ``\\boxed{…}``/``\\fbox{…}`` replaced by a mark (its content appended to
    ``contents``); None when one is unbalanced."""
    out, pos = [], 0
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        if match.start() < pos:
            continue
        end = _closing_brace(text, match.end() - 1)
        if end == -1:
            return None
        contents.append(text[match.end() : end])
        out += [text[pos : match.start()], f" {_MARK}{len(contents) - 1}{_MARK} "]
        pos = end + 1
    return "".join(out) + text[pos:]


def _explanations(text: str) -> str:
    """Parentheses holding words (``72 (the total)``, ``(since 8 × 9 = 72)``, ``18 (eighteen)``), or a number right
    after a number in words (``eighteen (18)``), are a remark, not part of the math: their brackets become
    boundaries, so what they hold is read as separate statements."""
    chars, stack = list(text), []
    for i, ch in enumerate(text):
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            start = stack.pop()
            if stack:
                continue
            restated = _NUMERAL.fullmatch(text[start + 1 : i].strip()) and _AFTER_NUMBER_WORD.search(text, 0, start)
            if restated or _PROSE_WORD.search(text, start, i):
                chars[start] = chars[i] = f" {_BOUNDARY} "
    return "".join(chars)


def _number_words(text: str) -> str | None:
    """``text`` with each number in words replaced by its digits (``seventy-two`` -> 72, ``a hundred`` -> 100); None
    when a run of number words names no one number (``one two``, ``twenty thirty``). ``the one`` is a pronoun."""
    if _NUMBER_WORD_SET.isdisjoint(_LETTERS.findall(text.casefold())):
        return text  # most answers hold none: one C-speed scan instead of the run pattern's
    failed = False

    def digits(match: re.Match) -> str:
        nonlocal failed
        words = [w for w in re.split(r"[\s\u2010\u2011-]+", match.group(0).casefold()) if w]
        if words == ["one"] and _PRONOUN_BEFORE.search(text, 0, match.start()):
            return match.group(0)
        value = _cardinal(words)
        failed = failed or value is None
        return f" {value} "

    replaced = _NUMBER_WORDS.sub(digits, text)
    return None if failed else replaced


def _cardinal(words: list[str]) -> int | None:
    """The value English number words name, None when they name none: read, then spelled back (`_spell`), and
    kept only when the spelling is theirs (an ``and`` only after ``hundred``/``thousand``…)."""
    if any(
        w == "and" and (i == 0 or not (words[i - 1] == "hundred" or words[i - 1] in _SCALES))
        for i, w in enumerate(words)
    ):
        return None
    words = [w for w in words if w != "and"]
    total = current = 0
    for word in words:
        if word == "hundred":
            current = (current or 1) * 100
        elif word in _SCALES:
            total, current = total + (current or 1) * _SCALES[word], 0
        else:
            current += _SMALL_NUMBERS.get(word, _TENS.get(word, 0))
    value = total + current
    implicit_one = ["one"] if words[0] == "hundred" or words[0] in _SCALES else []  # `a hundred`, `thousand`
    return value if _spell(value).split() == implicit_one + words else None


def _spell(value: int) -> str:
    if value < 20:
        return next(w for w, v in _SMALL_NUMBERS.items() if v == value)
    if value < 100:
        tens = next(w for w, v in _TENS.items() if v == value // 10 * 10)
        return tens + (f" {_spell(value % 10)}" if value % 10 else "")
    if value < 1000:
        return f"{_spell(value // 100)} hundred" + (f" {_spell(value % 100)}" if value % 100 else "")
    word, scale = next((w, s) for w, s in reversed(_SCALES.items()) if value >= s)
    return f"{_spell(value // scale)} {word}" + (f" {_spell(value % scale)}" if value % scale else "")


def _values(text: str, depth: int = 0) -> list[str] | None:
    """The values stated in ``text``, in order (a math span or box is read inside); None when hedged or malformed."""
    if depth > 3:
        return None
    spans = _math_spans(text)
    if spans is None:
        return None
    text, contents = spans
    text = _boxes(text, contents)
    if text is None:
        return None
    text = _TEXT_WORDS.sub(lambda m: f" {m.group(1)} ", text)
    text = _UNIT_POWER.sub(r"\1", _DEGREES.sub("", _THOUSANDS_BRACED.sub(",", text)))
    if _HEDGED.search(text):
        return None
    inner: list[list[str] | None] = [_values(c, depth + 1) for c in contents]
    text = _number_words(_explanations(_COLON.sub(": ", _PER_CENT.sub("percent", text))))
    if text is None:
        return None
    if "minus" in (folded := text.casefold()) or "negative" in folded:
        text = _SIGN_WORD.sub(r"\1-", text)
    tokens = text.split()
    kinds = []  # "w" prose word, "m" math, "b" boundary, "p" punctuation alone, "letter" decided below
    for tok in tokens:
        if tok == _BOUNDARY:
            kinds.append("b")
        elif _TRAILING_PUNCT.fullmatch(tok):
            kinds.append("p")  # punctuation left alone by a span or a remark: `$72$ .`, `72 (the total)..`
        elif _WORD.fullmatch(tok) and len(tok.strip("\"'.,;:!?")) > 1:
            kinds.append("w")
        elif _WORD.fullmatch(tok):
            kinds.append("letter")
        else:
            kinds.append("m")
    for i, kind in enumerate(kinds):  # a single letter next to math is a variable (`x = 5`, `12 x`), or a unit (`15 m`)
        if kind == "letter":
            prev = tokens[i - 1] if i and kinds[i - 1] == "m" else None
            after = tokens[i + 1] if i + 1 < len(tokens) and kinds[i + 1] == "m" else None
            letter = tokens[i].rstrip(".,;:!?")
            unit = (
                letter in _UNIT_LETTERS
                and prev
                and re.fullmatch(r"[\d.,]+", prev)
                and not (after and _OPERATOR_TOKEN.fullmatch(after))
            )
            if letter in _ARTICLES:  # `18 a day`, `I get 12`; but `x + a`, `\cos a`
                kinds[i] = (
                    "m"
                    if any(t and (_OPERATOR_TOKEN.fullmatch(t) or _COMMAND_END.search(t)) for t in (prev, after))
                    else "w"
                )
            else:
                kinds[i] = "m" if (prev or after) and not unit else "w"
    runs: list[list[str]] = []
    suffix: dict[int, str] = {}
    for i, (tok, kind) in enumerate(zip(tokens, kinds)):
        if kind != "m":
            if kind == "w" and runs and kinds[i - 1] == "m" and _PERCENT_WORD.fullmatch(tok):
                suffix[len(runs) - 1] = "\\%"  # `28 percent`, `$28$ pct`
            continue
        prev = tokens[i - 1] if i and kinds[i - 1] == "m" else None
        # Two operands side by side, with no word between, are no one statement (`12 13`, math-verify reads 25;
        # `1 000`; `72 (8 × 9)`); `3 \sqrt{2}`, `x = 5` are one.
        if prev is not None and re.search(r"[\d.)\]%" + _MARK + "]$", prev) and re.match(r"[\d(" + _MARK + "]", tok):
            return None
        if prev is None:
            runs.append([])
        runs[-1].append(tok)
    values: list[str] = []
    for index, run in enumerate(runs):
        run[-1] = _TRAILING_PUNCT.sub("", run[-1]) or run[-1]
        joined = " ".join(run).strip()
        whole = re.fullmatch(_MARK + r"(\d+)" + _MARK + r"[.,;:!?)]*", joined)
        if whole:
            found = inner[int(whole.group(1))]
            if found is None:
                return None
            values.extend(v + suffix.get(index, "") for v in found)
            continue
        for number, found in enumerate(inner):
            if (_MARK + str(number) + _MARK) in joined:
                if found is None or len(found) != 1:
                    return None
                joined = joined.replace(_MARK + str(number) + _MARK, found[0])
        values.append(joined + suffix.get(index, ""))
    return values


def statement_value(candidate: str) -> str | None:
    """The ONE value a short answer states, however it is wrapped; None when it states several or hedges.

    Read the same way whatever the wrapping: markdown emphasis, code and headings (``**72**``, `` `72` ``,
    ``### 72``), math spans (``$72$``, ``\\(72\\)``, ``$$72$$``), ``\\boxed{}``/``\\fbox{}``, words around it
    (``The answer is``, ``Final answer:``, ``Therefore``, a unit word, ``pct``/``percent`` -> ``\\%``, a trailing
    period),
    currency signs (``$18``, ``\\$18``, ``€18``), thousands separators (``32,349``, ``32,\\!349``, ``32{,}349``),
    ``\\text{…}`` of words, degree marks, a remark in parentheses holding only words (``72 (the total)``). The same
    value restated in words is one (``The answer is 72. Final answer: **72**``); a single letter named beside a
    value is a name (``the value of $x$ is $5$``). None when: two distinct values are stated (``72 or 73``, ``$11$
    and $12$``, ``72 (since 8 × 9 = 72)``: a check is a second statement too), two values stand side by side with no
    word between (``12 13``, ``72 (8 × 9)``, ``**72** ($72$)``), a value is said more than twice, a word hedges,
    negates, bounds or offers an alternative (``maybe``, ``not``, ``or``, ``about``, ``at least``, ``rounded``) or
    is a number word (``three``), a dash joins two numbers (``72–75``), a ``$`` is left unpaired. Text with no value
    at all (``Evelyn``, ``C``) is returned as it is.
    """
    text = _INVISIBLE.sub("", candidate).replace(_MARK, "").replace(_BOUNDARY, "")  # the reader's own marks
    text = _SPACES.sub(" ", _HEADING.sub("", text).translate(_SYMBOLS)).strip()
    while True:
        unwrapped = _EMPHASIS.sub(_emphasised, text)
        if unwrapped == text:
            break
        text = unwrapped
    text = _CURRENCY.sub("", text).strip()
    if _RANGE.search(text):
        return None
    values = _values(text)
    if values is None:
        return None
    stated = [_stated_as(v) for v in values if v.strip()]
    distinct = list(dict.fromkeys(stated))
    if any(stated.count(v) > 2 for v in distinct):
        return None  # said over and over is not "stated once" (the answer padded with copies of itself)
    if len(distinct) > 1:
        named = [v for v in distinct if not _LONE_VARIABLE.fullmatch(v)]
        distinct = named if len(named) == 1 else distinct
    if not distinct:
        return text or None
    if len(distinct) > 1:
        return None
    return next(v for v in values if v.strip() and _stated_as(v) == distinct[0]).strip()


def _stated_as(value: str) -> str:
    """What makes two stated values the same one: a plain number by its value (``1,250`` and ``1250``, ``18.00`` and
    ``18``: a restatement in words reads as digits), anything else by its text without spaces."""
    value = value.strip()
    if not _PLAIN_VALUE.fullmatch(value):
        return _SPACES.sub("", value)
    value = value.replace(",", "").lstrip("+")
    return value.rstrip("0").rstrip(".") if "." in value else value


def states_a_value(candidate: str) -> bool:
    """True when the answer (or a side of it, if it is an equation) is written as a value, with no operation left
    to do. Against a numeric truth, `(1 + 2) * 4` restates an arithmetic question rather than answering it, yet
    math-verify evaluates it to 12; ``6 * 2 = 12`` states 12 and is then held to the equation rule."""
    return any(any(c.isdigit() for c in side) and not _OPERATION.search(side) for side in candidate.split("="))


def _percent(match: re.Match) -> str:
    return (match.group(1) or match.group(2).replace(",", "")) + "\\%"


# What separates the parts of an answer when the truth has several (`split_parts`); everything else is read
# only to track bracket depth. `\,` and other one-character commands are matched whole so their comma or
# brace is not taken for a separator or a bracket.
_PART_TOKEN = re.compile(
    r"\\boxed\s*\{|\\(?:text|textbf|textit|textrm|textnormal|mbox)\s*\{|\\q?quad(?![A-Za-z])|\\[{}]|\\[A-Za-z]+|\\."
    r"|[{(\[]|[})\]]|[,;]|(?<![^\s$])(?:and|or)(?![^\s$])"
)
# Words that turn a list into something else (`(5, 8) \text{ but not } (8, 5)`) or hedge it.
_NEGATING = frozenset(
    (
        "not no nor neither except without but only if unless maybe perhaps approximately about roughly nearly almost"
    ).split()
)


def split_parts(candidate: str) -> list[str] | None:
    """The parts of a candidate answer to a truth of several parts, in order; None when it cannot be split.

    Parts are separated, outside brackets and braces, by ``,``, ``;``, ``\\quad``, ``\\qquad``, a bare ``and``/
    ``or``, a ``\\text{…}`` of words (``\\text{ and }``, ``\\text{ for part (a) and }``), and by the edges of
    each top-level ``\\boxed{…}``, whose content is split the same way (``\\boxed{1}, \\boxed{2}`` and
    ``\\boxed{1, 2}`` are both the parts 1 and 2). Empty parts are dropped. None when a ``\\text{…}`` between
    parts holds a digit, a negating or hedging word (``not``, ``except``, ``only if``, ``approximately``…) or the
    brackets do not balance.
    """
    text = _unwrapped(candidate)
    parts: list[str] = []
    depth, start, pos = 0, 0, 0

    def cut(end: int, resume: int) -> None:
        nonlocal start
        parts.append(text[start:end])
        start = resume

    while (token := _PART_TOKEN.search(text, pos)) is not None:
        tok, pos = token.group(), token.end()
        if tok[-1] == "{" and tok[0] == "\\" and len(tok) > 2:  # \boxed{ or \text{
            if depth:
                depth += 1
                continue
            end = _closing_brace(text, pos - 1)
            if end == -1:
                return None
            inner = text[pos:end]
            if tok.startswith("\\boxed"):
                boxed = split_parts(inner)
                if boxed is None:
                    return None
                cut(token.start(), end + 1)
                parts.extend(boxed)
            else:
                words = inner.casefold().split()
                if any(ch.isdigit() for ch in inner) or _NEGATING.intersection(words):
                    return None
                cut(token.start(), end + 1)
            pos = end + 1
        elif tok in ("{", "(", "[", "\\{"):
            depth += 1
        elif tok in ("}", ")", "]", "\\}"):
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and (tok in (",", ";", "and", "or") or tok in ("\\quad", "\\qquad")):
            cut(token.start(), pos)
    if depth:
        return None
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


_BRACE = re.compile(r"[{}]")


def _closing_brace(text: str, opening: int) -> int:
    """Index of the brace closing the one at ``opening``, -1 when unbalanced."""
    depth = 0
    for brace in _BRACE.finditer(text, opening):  # jumps from brace to brace instead of char by char
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return brace.start()
    return -1


def compare(truth: str, candidate: str | None) -> float | None:
    """1.0 / 0.0 for a match / no match, None when the truth cannot be parsed (runs in the helper).

        A truth of words compares as normalised strings (`normalise_words`). Any other truth is parsed as LaTeX
        (``$…$`` added unless it has one), falling back to a plain expression; math-verify's plain extractor alone
        keeps one number of an expression (``3\\sqrt{2}`` -> 3). The candidate must be `one_answer` and is parsed
        as LaTeX only. When the truth is a value and the candidate an equation (``x = 12``), every side of it that
        is not a bare variable must equal the truth: ``x = 12`` and ``x = \\frac{24}{2} = 12`` match 12,
        ``13 = 12`` and ``2x + 5 = 12`` do not (math-verify alone takes the last right-hand side). Against a truth
    that is a plain number, the answer must state a value (`states_a_value`): ``3 \\cdot 4`` and ``(1 + 2) * 4``
    score 0 for 12, though they equal it; ``3 \\cdot 4 = 12`` states 12 and is judged by the equation rule.

        A truth of several parts (math-verify reads it as a set of two or more: ``(5, 8), (8, 5)``, ``k = 45, n = 2``,
        ``\\{1, 2, 3\\}``, ``x_1 = 2,\\quad x_2 = 3``) may be answered in parts (`split_parts`: ``(5, 8) \\quad
        \\text{and} \\quad (8, 5)``, ``\\boxed{1}, \\boxed{2}, \\boxed{3}``), in any order, each part one answer: every
        part must equal (with the equation rule) a part of the truth and every part of the truth must be given, so an
        extra distinct part (``(5, 8), (8, 5), (1, 1)``) or a missing one never matches; a part given twice counts
        once, as in math-verify's sets (more than twice the truth's parts is a shotgun and scores 0). A truth of one
        part still needs one answer. An answer written as one set
        (``\\{1, 2, 3\\}``) is compared whole by math-verify, which also needs the same elements, no more, no fewer.
    """
    if is_words(truth):
        if candidate is None:
            return 0.0
        return 1.0 if normalise_words(candidate) == normalise_words(truth) else 0.0

    from latex2sympy2_extended.sets import FiniteSet
    from math_verify import parse

    def as_latex(expression: str):
        # Timeouts off: the helper's caller enforces one by killing the helper.
        return parse(expression if "$" in expression else f"${expression}$", parsing_timeout=None)

    gold = as_latex(truth) or parse(truth, parsing_timeout=None)
    if not gold:
        return None
    if candidate is None:
        return 0.0
    if isinstance(gold[0], FiniteSet) and len(gold[0]) > 1:
        parts = split_parts(candidate)
        if parts is None or len(parts) > 2 * len(gold[0]):
            return 0.0  # a list far longer than the truth is not its parts repeated but a shotgun (n*m comparisons)
        if len(parts) > 1:
            answers = [as_latex(one) if (one := one_answer(part)) is not None else None for part in parts]
            if not all(answers):
                return 0.0
            return 1.0 if _all_matched(list(gold[0].args), [answer[0] for answer in answers]) else 0.0
        # one part (a set written `\{1, 2\}`, or a single value): math-verify compares it as a whole
    candidate = one_answer(candidate)
    if candidate is None or (_NUMERAL.fullmatch(truth.strip()) and not states_a_value(candidate)):
        return 0.0
    answer = as_latex(candidate)
    if not answer:
        return 0.0
    return 1.0 if _equal(gold, answer) else 0.0


def _equal(gold, answer) -> bool:
    """math-verify's equality, with the equation rule of `compare`; ``gold``/``answer`` are parse results
    (lists) or single sympy objects."""
    from math_verify import verify

    sides = _value_sides(gold[0] if isinstance(gold, list) else gold, answer[0] if isinstance(answer, list) else answer)
    if sides is not None:
        return bool(sides) and all(verify(gold, side, timeout_seconds=None) for side in sides)
    return verify(gold, answer, timeout_seconds=None)


def _all_matched(golds: list, answers: list) -> bool:
    """True when every answer equals some gold part and every gold part is equalled by some answer: a repeated
    answer adds nothing, an extra distinct one fails. Answers in the truth's order cost one comparison each."""
    equal: dict[tuple[int, int], bool] = {}

    def same(g: int, a: int) -> bool:
        if (g, a) not in equal:
            equal[g, a] = _equal(golds[g], answers[a])
        return equal[g, a]

    order = range(len(golds))
    covered = set()
    for a in range(len(answers)):
        match = next((g for g in sorted(order, key=lambda g: g != a) if same(g, a)), None)
        if match is None:
            return False
        covered.add(match)
    return all(g in covered or any(same(g, a) for a in range(len(answers))) for g in order)


def _value_sides(gold, answer) -> list | None:
    """The sides of an equation ``answer`` that must each equal a value ``gold``; None when not that case,
    [] when ``answer`` is a relation that cannot state a value (an inequality)."""
    from sympy import And, Eq
    from sympy.core.relational import Relational

    from ..adapters.latex2sympy import conjuncts_in_order
    from ..adapters.math_verify import only_symbols

    if isinstance(gold, (Relational, And)) or not isinstance(answer, (Relational, And)):
        return None
    links = conjuncts_in_order(answer) if isinstance(answer, And) else (answer,)
    sides = []
    for link in links:
        if not isinstance(link, Eq):
            return []
        if not only_symbols(link.lhs):
            sides.append(link.lhs)
        sides.append(link.rhs)
    return sides


class Helper:
    """One helper process, used under a lock; replaced after a timeout or a crash."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.timeouts = 0
        self.fresh = False  # started, first answer not read yet: it is still importing sympy

    def warm(self) -> None:
        """Start the helper now, so its ~0.4 s of imports overlap the caller's set-up, not the first reward call."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self.proc, self.fresh = self._start(), True

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        return subprocess.Popen(
            [sys.executable, "-m", "grpo_sweep.rewards.mathcheck"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc, self.buffer = None, b""

    def compare(self, truth: str, candidate: str | None, timeout_s: float | None = None) -> float | None:
        timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self.proc, self.fresh = self._start(), True
            if self.fresh:
                timeout_s += 30.0  # the first call waits for sympy and math-verify to import
            try:
                self.proc.stdin.write((json.dumps([truth, candidate]) + "\n").encode())
                self.proc.stdin.flush()
                line = self._read_line(timeout_s)
            except (BrokenPipeError, OSError):
                line = None
            self.fresh = False
            if line is None:
                self.timeouts += 1
                log.warning(
                    "math-verify took over %.1f s (or crashed) on %r vs %r: scored 0",
                    timeout_s,
                    candidate[:80] if candidate else candidate,
                    truth[:80],
                )
                self.stop()
                return 0.0
            return json.loads(line)

    def _read_line(self, timeout_s: float) -> bytes | None:
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


HELPER = Helper()
atexit.register(HELPER.stop)


def _serve() -> None:
    # The first comparison builds math-verify's LaTeX parser and sympy's caches (~0.3 s): do it before the
    # first request, so a helper started early (Helper.warm) answers its first reward call at full speed.
    compare("12", "x + 12 = 3")
    for line in sys.stdin:
        truth, candidate = json.loads(line)
        try:
            result = compare(truth, candidate)
        except Exception:  # noqa: BLE001  (math-verify failing on odd input is a non-match)
            result = 0.0
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    import logging as _logging

    _logging.disable(_logging.WARNING)  # math-verify's "timeout is disabled" notices
    _serve()
