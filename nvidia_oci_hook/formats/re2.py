"""Go's regular-expression syntax (regexp/syntax with the Perl flags): does a pattern compile, and if not, why.

The hooks.d loader (containers/common, used by cri-o and podman) compiles `when.annotations` keys and values
and `when.commands` with Go's `regexp.Compile`. Python's `re` accepts a different language: look-around,
back-references, possessive quantifiers, `\\Z`, `(?P=name)`, conditionals and more compile in Python and fail
in Go, while Go accepts things Python refuses (`a**` is an error in both, but `^*` or `(?i)` mid-pattern are
not). So this module parses the pattern the way Go's parser does and returns Go's own error: its code
("invalid or unsupported Perl syntax") and the fragment Go quotes, so that a finding can show the exact text
the engine prints, `error parsing regexp: CODE: `FRAGMENT``.

Two versions of Go matter: 1.19 (podman 4.3 on Debian 12) and the newer ones that cri-o is built with. Go 1.22
added `(?<name>re)` named groups and Go 1.21 the Unicode 14 and 15 scripts for `\\p{...}`; `check` reports, with
each error, whether a newer Go accepts the pattern.

The resource limits Go applies while parsing (an expression nested more than 1000 levels, or one whose compiled
program would exceed about 3.3 million instructions) are computed on this module's own parse tree. It merges
literals and flattens nested concatenations and alternations as Go does, but does not factor common prefixes
out of alternations, so near those limits (patterns of tens of kilobytes or nested a thousand deep) its verdict
can differ from Go's; Go's limit on the total size of character classes (32 million code points) is not
checked. Nothing here recurses, so a hostile pattern cannot exhaust the interpreter's stack.

One parser, one file: the character classes, the operator stack and the size computation follow Go's one parser
step by step, and are checked against it together.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Optional

# Go's error codes (regexp/syntax ErrorCode), as its error text spells them.
INTERNAL_ERROR = "regexp/syntax: internal error"  # Go 1.19's code for "expression too large"
INVALID_CHAR_CLASS = "invalid character class"
INVALID_CHAR_RANGE = "invalid character class range"
INVALID_ESCAPE = "invalid escape sequence"
INVALID_NAMED_CAPTURE = "invalid named capture"
INVALID_PERL_OP = "invalid or unsupported Perl syntax"
INVALID_REPEAT_OP = "invalid nested repetition operator"
INVALID_REPEAT_SIZE = "invalid repeat count"
MISSING_BRACKET = "missing closing ]"
MISSING_PAREN = "missing closing )"
MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
TRAILING_BACKSLASH = "trailing backslash at end of expression"
UNEXPECTED_PAREN = "unexpected )"
NESTING_DEPTH = "expression nests too deeply"

_MAX_HEIGHT = 1000
_MAX_SIZE = (128 << 20) // 40  # compiled instructions
_MAX_REPEAT = 1000

# unicode.Categories in Go (the same in every version since 1.0).
_CATEGORIES = frozenset(
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs".split()  # noqa: SIM905
)
# unicode.Scripts in Go 1.19 (Unicode 13.0.0).
_SCRIPTS_UNICODE_13 = frozenset(
    """Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak Bengali Bhaiksuki
    Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian Chakma Cham Cherokee
    Chorasmian Common Coptic Cuneiform Cypriot Cyrillic Deseret Devanagari Dives_Akuru Dogra Duployan
    Egyptian_Hieroglyphs Elbasan Elymaic Ethiopic Georgian Glagolitic Gothic Grantha Greek Gujarati Gunjala_Gondi
    Gurmukhi Han Hangul Hanifi_Rohingya Hanunoo Hatran Hebrew Hiragana Imperial_Aramaic Inherited
    Inscriptional_Pahlavi Inscriptional_Parthian Javanese Kaithi Kannada Katakana Kayah_Li Kharoshthi
    Khitan_Small_Script Khmer Khojki Khudawadi Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani
    Makasar Malayalam Mandaic Manichaean Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui
    Meroitic_Cursive Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean Nandinagari New_Tai_Lue
    Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Old_Hungarian Old_Italic Old_North_Arabian Old_Permic
    Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Oriya Osage Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau
    Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic Samaritan Saurashtra Sharada Shavian Siddham SignWriting
    Sinhala Sogdian Sora_Sompeng Soyombo Sundanese Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet
    Takri Tamil Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Ugaritic Vai Wancho Warang_Citi Yezidi Yi
    Zanabazar_Square""".split()  # noqa: SIM905
)
# Scripts added with Unicode 14 and 15, which Go has from 1.21 on.
_SCRIPTS_UNICODE_15 = frozenset("Cypro_Minoan Old_Uyghur Tangsa Toto Vithkuqi Kawi Nag_Mundari".split())  # noqa: SIM905

_POSIX_CLASSES = frozenset(
    f"[:{negate}{name}:]"
    for name in "alnum alpha ascii blank cntrl digit graph lower print punct space upper word xdigit".split()  # noqa: SIM905
    for negate in ("", "^")
)
_PERL_CLASSES = frozenset("dDsSwW")
_C_ESCAPES = frozenset("afnrtv")
_HEX = "0123456789abcdefABCDEF"
_NAME_CHARACTERS = frozenset("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class RegexError:
    """Go's parse error: the code and the fragment it quotes; newer_go_accepts when only Go 1.19/1.20 refuse it."""

    code: str
    expr: str
    newer_go_accepts: bool = False

    def __str__(self) -> str:
        return f"error parsing regexp: {self.code}: `{self.expr}`"


class _Fail(Exception):
    def __init__(self, code: str, expr: str) -> None:
        super().__init__(code)
        self.code = code
        self.expr = expr


# Parse-tree nodes: only what the limits need (kind, size in instructions, height, children, repeat bounds).
_LITERAL, _ATOM, _EMPTY, _CAPTURE, _STAR, _PLUS, _QUEST, _REPEAT, _CONCAT, _ALTERNATE = range(10)
_LPAREN, _VBAR = 100, 101  # markers on the parse stack


@dataclass
class _Node:
    op: int
    subs: list[_Node] = field(default_factory=list)
    runes: int = 0  # literal length
    fold: bool = False  # literal folded (?i)
    min: int = 0
    max: int = 0
    capture: bool = False  # for _LPAREN
    saved_fold: bool = False  # for _LPAREN: the flag to restore at ')'
    height: int = 1
    size: int = 1
    branches: int = 1  # for _ALTERNATE: the alternatives once nested alternations are hoisted

    def finish(self) -> _Node:
        # Go hoists the parts of a concatenation inside a concatenation (and of an alternation inside an
        # alternation) into their parent; the heights and sizes below are those of the hoisted tree, while
        # `subs` keeps the nesting, which changes neither.
        same = self.op if self.op in (_CONCAT, _ALTERNATE) else -1
        self.height = 1 + max((sub.height - (sub.op == same) for sub in self.subs), default=0)
        if same == _ALTERNATE:
            self.branches = sum(sub.branches if sub.op == same else 1 for sub in self.subs)
        self.size = max(1, self._size())
        return self

    def _size(self) -> int:
        op = self.op
        if op == _LITERAL:
            return self.runes
        if op in (_CAPTURE, _STAR):
            return 2 + self.subs[0].size
        if op in (_PLUS, _QUEST):
            return 1 + self.subs[0].size
        if op == _CONCAT:
            return sum(sub.size for sub in self.subs)
        if op == _ALTERNATE:
            parts = sum(sub.size - (sub.branches - 1 if sub.op == _ALTERNATE else 0) for sub in self.subs)
            return parts + self.branches - 1
        if op == _REPEAT:
            sub = self.subs[0].size
            if self.max == -1:
                return 2 + sub if self.min == 0 else 1 + self.min * sub
            return self.max * sub + (self.max - self.min)
        return 0


def _repeat_is_valid(node: _Node, limit: int) -> bool:
    """Go's rule: nested counted repetitions may not multiply out to more than `limit` copies."""
    pending = [(node, limit)]
    while pending:
        current, n = pending.pop()
        if current.op == _REPEAT:
            m = current.max
            if m == 0:
                continue
            if m < 0:
                m = current.min
            if m > n:
                return False
            if m > 0:
                n //= m
        pending.extend((sub, n) for sub in current.subs)
    return True


class _Parser:
    def __init__(self, pattern: str, newer_go: bool) -> None:
        self.s = pattern
        self.newer_go = newer_go
        self.stack: list[_Node] = []
        self.fold = False
        self.nodes = 0
        self.repeats = 1
        self._occurrences: dict[str, list[int]] = {}

    def find(self, needle: str, start: int) -> int:
        """str.find, answered from one scan per needle: Go rescans too, but a hostile pattern must stay linear."""
        positions = self._occurrences.get(needle)
        if positions is None:
            positions = [match.start() for match in re.finditer(re.escape(needle), self.s)]
            self._occurrences[needle] = positions
        index = bisect.bisect_left(positions, start)
        return positions[index] if index < len(positions) else -1

    # -- the parse stack -------------------------------------------------------------------------------------

    def push(self, node: _Node) -> None:
        self.nodes += 1
        self.stack.append(node.finish())

    def literal(self) -> None:
        self.push(_Node(_LITERAL, runes=1, fold=self.fold))

    def atom(self) -> None:
        self.push(_Node(_ATOM))

    def _take_above_marker(self) -> list[_Node]:
        i = len(self.stack)
        while i > 0 and self.stack[i - 1].op < _LPAREN:
            i -= 1
        taken = self.stack[i:]
        del self.stack[i:]
        return taken

    def concat(self) -> None:
        subs = self._take_above_marker()
        if not subs:
            self.push(_Node(_EMPTY))
        else:
            self.push(subs[0] if len(subs) == 1 else _Node(_CONCAT, subs))

    def alternate(self) -> None:
        subs = self._take_above_marker()
        if not subs:
            self.push(_Node(_EMPTY))
        else:
            self.push(subs[0] if len(subs) == 1 else _Node(_ALTERNATE, subs))

    def swap_vertical_bar(self) -> bool:
        stack = self.stack
        if len(stack) >= 2 and stack[-2].op == _VBAR:
            stack[-2], stack[-1] = stack[-1], stack[-2]
            return True
        return False

    def check_limits(self) -> None:
        if not self.stack:
            return
        top = self.stack[-1]
        if top.height > _MAX_HEIGHT:
            raise _Fail(NESTING_DEPTH, self.s)
        if self.nodes * self.repeats >= _MAX_SIZE and top.size > _MAX_SIZE:
            raise _Fail(INTERNAL_ERROR, self.s)

    # -- the main loop ---------------------------------------------------------------------------------------

    def parse(self) -> None:
        s = self.s
        pos = 0
        last_repeat: Optional[int] = None  # where the previous token, if it was a repetition, started
        while pos < len(s):
            repeat: Optional[int] = None
            c = s[pos]
            if c == "(":
                if pos + 1 < len(s) and s[pos + 1] == "?":
                    pos = self.perl_flags(pos)
                else:
                    self.push(_Node(_LPAREN, capture=True, saved_fold=self.fold))
                    pos += 1
            elif c == "|":
                self.concat()
                if not self.swap_vertical_bar():
                    self.push(_Node(_VBAR))
                pos += 1
            elif c == ")":
                self.right_paren()
                pos += 1
            elif c in "^$.":
                self.atom()
                pos += 1
            elif c == "[":
                pos = self.char_class(pos)
            elif c in "*+?":
                end = self.repeat(pos, pos + 1, last_repeat, _STAR if c == "*" else _PLUS if c == "+" else _QUEST)
                repeat, pos = pos, end
            elif c == "{":
                bounds = self.repeat_bounds(pos)
                if bounds is None:
                    self.literal()  # not a well-formed {n,m}: a literal brace
                    pos += 1
                else:
                    low, high, after = bounds
                    if low < 0 or low > _MAX_REPEAT or high > _MAX_REPEAT or (high >= 0 and low > high):
                        raise _Fail(INVALID_REPEAT_SIZE, s[pos:after])
                    end = self.repeat(pos, after, last_repeat, _REPEAT, low, high)
                    repeat, pos = pos, end
            elif c == "\\":
                pos = self.backslash(pos)
            else:
                self.literal()
                pos += 1
            last_repeat = repeat
            self.check_limits()
        self.concat()
        if self.swap_vertical_bar():
            self.stack.pop()
        self.alternate()
        self.check_limits()
        if len(self.stack) != 1:
            raise _Fail(MISSING_PAREN, s)

    def repeat(self, start: int, after: int, last_repeat: Optional[int], op: int, low: int = 0, high: int = 0) -> int:
        s = self.s
        if after < len(s) and s[after] == "?":
            after += 1  # non-greedy
        if last_repeat is not None:
            raise _Fail(INVALID_REPEAT_OP, s[last_repeat:after])
        if not self.stack or self.stack[-1].op >= _LPAREN:
            raise _Fail(MISSING_REPEAT_ARGUMENT, s[start:after])
        node = _Node(op, [self.stack[-1]], min=low, max=high)
        self.nodes += 1
        self.stack[-1] = node.finish()
        if op == _REPEAT:
            factor = high if high != -1 else low
            self.repeats = min(_MAX_SIZE, self.repeats * max(factor, 1))
            if (low >= 2 or high >= 2) and not _repeat_is_valid(node, _MAX_REPEAT):
                raise _Fail(INVALID_REPEAT_SIZE, s[start:after])
        return after

    def repeat_bounds(self, pos: int) -> Optional[tuple[int, int, int]]:
        """{n}, {n,} or {n,m} at pos: (min, max or -1, end); -1 for min when a number is too big; None if not."""
        s = self.s
        number = self.integer(pos + 1)
        if number is None:
            return None
        low, pos = number
        if pos >= len(s):
            return None
        if s[pos] != ",":
            high = low
        else:
            pos += 1
            if pos >= len(s):
                return None
            if s[pos] == "}":
                high = -1
            else:
                number = self.integer(pos)
                if number is None:
                    return None
                high, pos = number
                if high < 0:
                    low = -1
        if pos >= len(s) or s[pos] != "}":
            return None
        return low, high, pos + 1

    def integer(self, pos: int) -> Optional[tuple[int, int]]:
        s = self.s
        if pos >= len(s) or not "0" <= s[pos] <= "9":
            return None
        if s[pos] == "0" and pos + 1 < len(s) and "0" <= s[pos + 1] <= "9":
            return None  # no leading zeros
        end = pos
        while end < len(s) and "0" <= s[end] <= "9":
            end += 1
        digits = s[pos:end]
        # Go gives up (and reports -1) once the value reaches 10^8 with digits still to come.
        too_big = len(digits) > 10 or (len(digits) > 1 and int(digits[:-1]) >= 10**8)
        return (-1 if too_big else int(digits)), end

    # -- groups ----------------------------------------------------------------------------------------------

    def perl_flags(self, start: int) -> int:
        s = self.s
        # (?P<name>re), and from Go 1.22 on (?<name>re)
        name_at = None
        if len(s) - start > 4 and s[start + 2] == "P" and s[start + 3] == "<":
            name_at = start + 4
        elif self.newer_go and len(s) - start > 3 and s[start + 2] == "<":
            name_at = start + 3
        if name_at is not None:
            end = self.find(">", start)
            if end < 0:
                raise _Fail(INVALID_NAMED_CAPTURE, s[start:])
            name = s[name_at:end]
            if not name or not all(ch in _NAME_CHARACTERS for ch in name):
                raise _Fail(INVALID_NAMED_CAPTURE, s[start : end + 1])
            self.push(_Node(_LPAREN, capture=True, saved_fold=self.fold))
            return end + 1
        pos = start + 2
        fold = self.fold
        negated = False
        saw_flag = False
        while pos < len(s):
            c = s[pos]
            pos += 1
            if c in "imsU":
                if c == "i":
                    fold = not negated
                saw_flag = True
                continue
            if c == "-":
                if negated:
                    break
                negated = True
                saw_flag = False
                continue
            if c in ":)":
                if negated and not saw_flag:
                    break
                if c == ":":
                    self.push(_Node(_LPAREN, capture=False, saved_fold=self.fold))
                self.fold = fold
                return pos
            break
        raise _Fail(INVALID_PERL_OP, s[start:pos])

    def right_paren(self) -> None:
        self.concat()
        if self.swap_vertical_bar():
            self.stack.pop()
        self.alternate()
        stack = self.stack
        if len(stack) < 2 or stack[-2].op != _LPAREN:
            raise _Fail(UNEXPECTED_PAREN, self.s)
        inner = stack.pop()
        paren = stack.pop()
        self.fold = paren.saved_fold
        self.push(_Node(_CAPTURE, [inner]) if paren.capture else inner)

    # -- escapes ---------------------------------------------------------------------------------------------

    def backslash(self, pos: int) -> int:
        s = self.s
        if pos + 1 < len(s):
            c = s[pos + 1]
            if c in "AbBz":
                self.atom()
                return pos + 2
            if c == "C":
                raise _Fail(INVALID_ESCAPE, s[pos : pos + 2])
            if c == "Q":
                end = self.find("\\E", pos + 2)
                text = s[pos + 2 :] if end < 0 else s[pos + 2 : end]
                for _ in text:
                    self.literal()
                return len(s) if end < 0 else end + 2
            if c in "pP":
                after = self.unicode_class(pos)
                self.atom()
                return after
            if c in _PERL_CLASSES:
                self.atom()
                return pos + 2
        after = self.escape(pos)
        self.literal()
        return after

    def escape(self, pos: int) -> int:
        """An ordinary escape at pos (a backslash); returns where it ends."""
        s = self.s
        if pos + 1 >= len(s):
            raise _Fail(TRAILING_BACKSLASH, "")
        c = s[pos + 1]
        t = pos + 2
        if c < "\x80" and not c.isalnum():
            return t  # escaped punctuation is itself
        if c in "1234567" and not (t < len(s) and "0" <= s[t] <= "7"):
            raise _Fail(INVALID_ESCAPE, s[pos:t])  # \1 alone is a back-reference
        if c in "01234567":
            for _ in range(2):
                if t < len(s) and "0" <= s[t] <= "7":
                    t += 1
            return t
        if c == "x":
            return self.hex_escape(pos)
        if c in _C_ESCAPES:
            return t
        raise _Fail(INVALID_ESCAPE, s[pos:t])

    def hex_escape(self, pos: int) -> int:
        s = self.s
        t = pos + 2
        if t >= len(s):
            raise _Fail(INVALID_ESCAPE, s[pos:t])
        c = s[t]
        t += 1
        if c == "{":
            digits = 0
            value = 0
            while True:
                if t >= len(s):
                    raise _Fail(INVALID_ESCAPE, s[pos:t])
                c = s[t]
                t += 1
                if c == "}":
                    break
                if c not in _HEX:
                    raise _Fail(INVALID_ESCAPE, s[pos:t])
                value = value * 16 + int(c, 16)
                if value > 0x10FFFF:
                    raise _Fail(INVALID_ESCAPE, s[pos:t])
                digits += 1
            if digits == 0:
                raise _Fail(INVALID_ESCAPE, s[pos:t])
            return t
        second = s[t] if t < len(s) else ""
        t = min(t + 1, len(s))
        if c not in _HEX or not second or second not in _HEX:
            raise _Fail(INVALID_ESCAPE, s[pos:t])
        return t

    def unicode_class(self, pos: int) -> int:
        """\\pX, \\p{Name}, \\P..., \\p{^Name} at pos; returns where it ends."""
        s = self.s
        t = pos + 2
        if t < len(s) and s[t] == "{":
            end = self.find("}", pos)
            if end < 0:
                raise _Fail(INVALID_CHAR_RANGE, s[pos:])
            sequence, name, after = s[pos : end + 1], s[pos + 3 : end], end + 1
        else:
            after = min(t + 1, len(s))
            sequence, name = s[pos:after], s[t:after]
        if name.startswith("^"):
            name = name[1:]
        if name == "Any" or name in _CATEGORIES or name in _SCRIPTS_UNICODE_13:
            return after
        if self.newer_go and name in _SCRIPTS_UNICODE_15:
            return after
        raise _Fail(INVALID_CHAR_RANGE, sequence)

    # -- character classes -----------------------------------------------------------------------------------

    def char_class(self, start: int) -> int:
        s = self.s
        t = start + 1
        if t < len(s) and s[t] == "^":
            t += 1
        first = True
        while t >= len(s) or s[t] != "]" or first:
            first = False
            if s.startswith("[:", t) and len(s) - t > 2:
                close = self.find(":]", t + 2)
                if close >= 0:
                    name = s[t : close + 2]
                    if name not in _POSIX_CLASSES:
                        raise _Fail(INVALID_CHAR_RANGE, name)
                    t = close + 2
                    continue
            if s.startswith("\\p", t) or s.startswith("\\P", t):
                t = self.unicode_class(t)
                continue
            if t + 1 < len(s) and s[t] == "\\" and s[t + 1] in _PERL_CLASSES:
                t += 2
                continue
            low_at = t
            low, t = self.class_char(t, start)
            if t + 1 < len(s) and s[t] == "-" and s[t + 1] != "]":
                high, t = self.class_char(t + 1, start)
                if high < low:
                    raise _Fail(INVALID_CHAR_RANGE, s[low_at:t])
        self.atom()
        return t + 1

    def class_char(self, pos: int, class_start: int) -> tuple[int, int]:
        """One character of a class, escaped or not: (code point, end)."""
        s = self.s
        if pos >= len(s):
            raise _Fail(MISSING_BRACKET, s[class_start:])
        if s[pos] != "\\":
            return ord(s[pos]), pos + 1
        end = self.escape(pos)
        return _escape_value(s[pos:end]), end


def _escape_value(escape: str) -> int:
    """The code point an ordinary escape (already known to be valid) stands for."""
    c = escape[1]
    if c < "\x80" and not c.isalnum():
        return ord(c)
    if c in "01234567":
        return int(escape[1:], 8)
    if c == "x":
        digits = escape[3:-1] if escape[2] == "{" else escape[2:]
        return int(digits, 16)
    return {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}[c]


def _parse(pattern: str, newer_go: bool) -> Optional[RegexError]:
    try:
        _Parser(pattern, newer_go).parse()
    except _Fail as failure:
        return RegexError(failure.code, failure.expr)
    return None


def check(pattern: str) -> Optional[RegexError]:
    """None when Go (every version from 1.19 on) compiles pattern; otherwise Go 1.19's error.

    The error's newer_go_accepts is true when Go 1.22 and later compile the pattern.
    """
    # Go's JSON decoder hands the loader U+FFFD for an unpaired surrogate escape.
    pattern = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in pattern)
    old = _parse(pattern, newer_go=False)
    if old is None:
        return None
    if _parse(pattern, newer_go=True) is None:
        return RegexError(old.code, old.expr, newer_go_accepts=True)
    return old
