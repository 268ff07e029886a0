"""The cheap text pre-filter: whether a source text can have a finding at all, decided without LibCST.

Parsing with LibCST is the floor of a check (``benchmarks/migrate_bench.py`` prints both), so a file
no rule can fire on is never parsed. Two stages, both conservative (they may keep a file that has no
finding, never drop one that has):

1. Trigger words in the raw text: a plain substring test for :data:`TOKENS` (or the int-device
   patterns), then :data:`PREFILTER`. Every rule needs one of these in the code it reads.
2. Where the matches are. Rules never see comments, and no rule reports inside a plain string that
   is a statement of its own (a docstring, or a string used as a comment: the pass skips those,
   :meth:`neuron_conformance.migrate.rule_pass.RulePass.visit_Expr`). One lexical scan
   (:data:`_LEXEMES`) finds the comments and string literals; a match that starts inside a comment
   or such a statement string is dropped, and the file is kept at the first match anywhere else.
   A string counts as a statement only when that is certain from the text: it begins its line,
   outside any bracket, not after a backslash continuation, with nothing but a comment after it on
   its line; any other string is taken for a value.

Public API: :func:`may_have_findings`, :data:`PREFILTER`, :data:`TOKENS`.
"""

from __future__ import annotations

import re
from typing import Iterator, Tuple

#: A file can only have a finding if it contains one of these substrings (all rules' triggers).
PREFILTER = re.compile(
    r"\.cuda\b|import cuda\b|, ?cuda\b|[\"']cuda|is_cuda|use_cuda|cudnn|cudagraph|nccl|"
    r"torch\.accelerator|import accelerator|GradScaler|\.to\(\s*\d|device\s*=\s*\d|DataParallel|"
    r"\bautocast|is_autocast_enabled|get_autocast_gpu_dtype|"  # not `maybe_autocast`, a library's own helper
    r"reduce-overhead|max-autotune|CUDA_|CUDA out of memory|CUDAGraph|CUDAExtension|\.CUDA\b|"
    r"\.cuh?[\"']|triton|cpp_extension|version\.hip"
)

#: Substrings one of which every :data:`PREFILTER` match contains (or :data:`_INT_TO`/:data:`_INT_KW`
#: match): plain ``in`` tests (C substring search) reject most files before the regular expression runs.
TOKENS = (
    "cuda",
    "CUDA",
    "cudnn",
    "nccl",
    "accelerator",
    "GradScaler",
    "autocast",
    "DataParallel",
    "reduce-overhead",
    "max-autotune",
    "triton",
    "cpp_extension",
    "version.hip",
    ".cu'",
    '.cu"',
    ".cuh",
)
#: ``.to(0)`` and ``device=0`` (NM109), as two patterns that each begin with a literal (fast search).
_INT_TO = re.compile(r"\.to\(\s*\d")
_INT_KW = re.compile(r"device\s*=\s*\d")

#: Comments and string literals, in source order (Python 3.11 lexical grammar: triple quotes,
#: backslash escapes; an f-string cannot hold its own quote character before 3.12). The pattern
#: begins at a quote or ``#`` only (a small first-character set: fast scanning); a string's prefix
#: letters are read back from the text before its quote (:func:`_prefix`). String bodies are
#: "unrolled loops": no alternation per character.
_LEXEMES = re.compile(
    r"(?P<comment>#[^\r\n]*)"
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'"
    r'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"',
    re.S,
)
_PREFIX_LETTERS = frozenset("rRbBuUfF")


def _prefix(text: str, quote: int) -> Tuple[int, str]:
    """``(start, prefix)`` of the string literal whose opening quote is at ``quote``: up to two
    prefix letters directly before it (``rb"..."``, ``f'...'``). Letters that end a longer name
    are no prefix (``if"x"`` is a keyword, then a string)."""
    i = quote
    while i > 0 and quote - i < 2 and text[i - 1] in _PREFIX_LETTERS:
        i -= 1
    if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        return quote, ""
    return i, text[i:quote]


_OPENERS = ("(", "[", "{")
_CLOSERS = (")", "]", "}")


def _balance(code: str) -> int:
    """Opening minus closing brackets in ``code`` (a stretch without comments or strings)."""
    return sum(code.count(c) for c in _OPENERS) - sum(code.count(c) for c in _CLOSERS)


def lexemes(text: str) -> Iterator[Tuple[int, int, bool]]:
    """``(start, end, ignorable)`` of each comment and string literal of ``text``, in order.

    ``ignorable`` is True for a comment, and for a plain (not f-) string that is certainly a whole
    expression statement: it begins its line, outside any bracket, not after a backslash
    continuation, and only blanks or a comment follow it on its line. False for every other string
    (taken for a value). A generator, so a caller that stops early scans only the text it needs. On
    text that is not valid Python the scan still ends; its answers then only decide whether LibCST
    is asked (which reports the file)."""
    depth, prev_end = 0, 0
    for m in _LEXEMES.finditer(text):
        start, end = m.span()
        if m.lastgroup == "comment":
            depth += _balance(text[prev_end:start])
            prev_end = end
            yield start, end, True
            continue
        start, prefix = _prefix(text, start)
        depth += _balance(text[prev_end:start])
        prev_end = end
        ignorable = False
        if depth == 0 and "f" not in prefix and "F" not in prefix:
            line_start = text.rfind("\n", 0, start) + 1
            k = line_start - 1  # the newline ending the line before (-1 on the first line)
            if k > 0 and text[k - 1] == "\r":
                k -= 1
            if not text[line_start:start].strip(" \t") and not (k > 0 and text[k - 1] == "\\"):
                eol = text.find("\n", end)
                rest = text[end : len(text) if eol < 0 else eol].strip(" \t\r")
                ignorable = not rest or rest.startswith("#")
        yield start, end, ignorable


def may_have_findings(text: str) -> bool:
    """The cheap pre-filter (see the module docstring): False means no rule can fire on ``text``."""
    if not any(tok in text for tok in TOKENS) and _INT_TO.search(text) is None and _INT_KW.search(text) is None:
        return False
    scan = lexemes(text)
    current = (-1, -1, False)  # the first comment or string that does not end before the match
    for m in PREFILTER.finditer(text):
        pos = m.start()
        while current[1] <= pos:
            current = next(scan, None)
            if current is None:
                return True  # after the last comment or string: in code
        if pos < current[0] or not current[2]:
            return True  # in code, or in a string that is a value
    return False
