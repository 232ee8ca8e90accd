"""A stream of Kubernetes manifests as one document: `helm template` output, `kubectl get -o yaml|json`, a file.

The stream is read as an array of its documents, so `/0` is the first document and `/2/items/7/spec` is the spec
of the eighth item of the third one (a `kind: List`). Each YAML document is read on its own, so one that does not
parse is a finding on its line and the others are still judged, as `kubectl apply -f` reads them one by one.

Speed: `kubectl get pods -A -o yaml` of a large cluster is tens of megabytes. Values come from blockyaml where the
text has the shape Go's encoders write, else from leanyaml (both type scalars as goyaml.v2 does, as sigs.k8s.io/yaml
gives them to the API server), with PyYAML only for a document outside leanyaml's subset; lines are
found when a finding asks for one, by walking the block structure of that one object's text, so a clean stream
never pays for positions.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.formats import blockyaml, jsontext, leanyaml
from nvidia_oci_hook.formats.parsing import LoadProblem, Locator, Parsed, decode_utf8
from nvidia_oci_hook.formats.positions import LineIndex, PositionMap

# What the API server writes and no check reads: an object's status is passed over unread where blockyaml reads it.
UNREAD = frozenset({"status"})
_CONTENT = re.compile(r"^[ \t]*[^\s#]", re.MULTILINE)
# A stream is manifests when a document names both an apiVersion and a CamelCase kind at the top of an object:
# CDI specs have a `kind` (vendor/class) but no apiVersion, and no other kind this tool reads has either.
_YAML_API_VERSION = re.compile(rb"^(?:- +)?apiVersion: *[\"']?[A-Za-z0-9./-]+", re.MULTILINE)
_YAML_KIND = re.compile(rb"^(?:- +| *)kind: *[\"']?[A-Z][A-Za-z0-9]*[\"']? *\r?$", re.MULTILINE)
_JSON_API_VERSION = re.compile(rb'"apiVersion"\s*:\s*"[A-Za-z0-9./-]+"')
_JSON_KIND = re.compile(rb'"kind"\s*:\s*"[A-Z][A-Za-z0-9]*"')
_SNIFF_BYTES = 1 << 16


# A stream with no object: only `---` and `...` markers, comments and blank lines, as `helm template` writes for a
# template that renders nothing (`--show-only` of a disabled component) or a chart with every part turned off.
_NOTHING_BUT_MARKERS = re.compile(rb"\A(?:[ \t]*(?:(?:---|\.\.\.)(?=[ \t\r\n]|\Z)[ \t]*)?(?:#[^\n]*)?\r?(?:\n|\Z))+\Z")
_BOM = b"\xef\xbb\xbf"


def looks_like_manifests(path: str, raw: bytes) -> bool:
    head = raw[len(_BOM) :] if raw.startswith(_BOM) else raw
    head = head[:_SNIFF_BYTES]
    if head.lstrip()[:1] in (b"{", b"["):
        return bool(_JSON_API_VERSION.search(head) and _JSON_KIND.search(head))
    if _YAML_API_VERSION.search(head) and _YAML_KIND.search(head):
        return True
    # No CDI spec, OCI document or engine configuration is only comments: such a stream is manifests that
    # render nothing. A blank file names no kind at all.
    return bool(head.strip()) and len(raw) <= _SNIFF_BYTES and _NOTHING_BUT_MARKERS.match(head) is not None


def read_stream(raw: bytes) -> Parsed:
    problems: list[LoadProblem] = []
    text = decode_utf8(raw, problems)
    if text[:1] == "\ufeff":
        text = text[1:]
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if not text.strip():
        problems.append(LoadProblem("DOC001", "the file is empty: expected Kubernetes manifests", line=1, column=1))
        return Parsed(text, None, False, problems, PositionMap(text))
    if text.lstrip()[:1] in ("{", "["):
        return _read_json(text, problems)
    values: list[Any] = []
    spans: list[tuple[int, int, int]] = []
    # Millions of new containers and no cycle among them: the cyclic collector would walk them again and again.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for start, end, first_row in _documents(text):
            values.append(
                _read_yaml_document(text[start:end] if (start, end) != (0, len(text)) else text, first_row, problems)
            )
            spans.append((start, end, first_row))
    finally:
        if len(text) >= _FREEZE_BYTES:
            # Checks that make small objects by the hundred thousand would otherwise start the collector's full
            # passes over these millions again and again: the values stay until the process ends anyway.
            gc.freeze()
        if collecting:
            gc.enable()
    return Parsed(text, values, True, problems, StreamPositions(text, spans))


def _documents(text: str) -> list[tuple[int, int, int]]:
    """(start, end, first row) of each document: a `---` line starts one; text before the first marker is a
    document only where it holds more than comments."""
    # str.find, not a MULTILINE regular expression, which would try every offset of tens of megabytes.
    starts = [0] if text.startswith("---") and text[3:4] in ("", " ", "\t", "\n") else []
    marker = text.find("\n---")
    while marker != -1:
        if text[marker + 4 : marker + 5] in ("", " ", "\t", "\n"):
            starts.append(marker + 1)
        marker = text.find("\n---", marker + 4)
    if (not starts or starts[0] != 0) and _CONTENT.search(text, 0, starts[0] if starts else len(text)):
        starts.insert(0, 0)
    documents = []
    row = 0
    previous = 0
    for index, start in enumerate(starts):
        row += text.count("\n", previous, start)
        previous = start
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        documents.append((start, end, row))
    return documents


def _read_yaml_document(text: str, first_row: int, problems: list[LoadProblem]) -> Any:
    try:
        if len(text) >= _PARALLEL_BYTES:
            listed = _read_list_in_parallel(text)
            if listed is not None:
                return listed
        return blockyaml.loads(text, prune=UNREAD)
    except blockyaml.Unsupported:
        pass
    try:
        return leanyaml.loads(text)
    except leanyaml.YAMLSubsetError as exc:
        if not exc.unsupported:
            problems.append(LoadProblem("DOC001", f"invalid YAML: {exc.reason}", line=first_row + exc.line))
            return None
    except RecursionError:
        problems.append(LoadProblem("DOC003", "YAML nested deeper than this tool parses", line=first_row + 1))
        return None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        line = first_row + mark.line + 1 if mark else first_row + 1
        problems.append(
            LoadProblem("DOC001", f"invalid YAML: {reason}", line=line, column=mark.column + 1 if mark else None)
        )
    except yaml.YAMLError as exc:
        problems.append(LoadProblem("DOC001", f"invalid YAML: {exc}".replace("\n", " "), line=first_row + 1))
    except RecursionError:
        problems.append(LoadProblem("DOC003", "YAML nested deeper than this tool parses", line=first_row + 1))
    return None


# A `kind: List` this large (kubectl's `-o yaml` of some thousand pods) has its items read by as many processes as
# the machine has cores: each reads a run of items, and the values come back in marshal's format, the fastest the
# standard library has for plain data.
_PARALLEL_BYTES = 8 * 1024 * 1024
_FREEZE_BYTES = 8 * 1024 * 1024
_ITEMS = re.compile(r"\nitems:[ \t]*\n(?=( *)- )")


def _read_list_in_parallel(text: str) -> Optional[dict[str, Any]]:
    """The value of a `kind: List` document read in parts, or None where it has not that shape (or a part is
    outside blockyaml's), which leaves the whole to the readers one after the other."""
    import os

    workers = min(os.cpu_count() or 1, 8)
    # Each regular expression here starts with a line break, which it searches for as fast as str.find does;
    # one that starts with a MULTILINE `^` would try every offset of tens of megabytes.
    found = _ITEMS.search(text)
    if workers < 2 or found is None:
        return None
    column = len(found.group(1))
    start = found.end()
    shallower = rf"| {{0,{column - 1}}}-" if column else ""
    stop = re.compile(rf"\n(?: {{0,{column}}}(?=[^\s#-]){shallower})").search(text, start)
    end = stop.start() + 1 if stop else len(text)
    entry = re.compile(rf"\n {{{column}}}-(?=[ \n])")
    bounds = [start]
    for part in range(1, workers):
        following = entry.search(text, max(bounds[-1], start + (end - start) * part // workers), end - 1)
        if following is None:
            break
        bounds.append(following.start() + 1)
    bounds.append(end)
    parts = [(bounds[index], bounds[index + 1]) for index in range(len(bounds) - 1)]
    outside = text[:start] + text[end:]
    items = _read_parts(text, parts)
    if items is None:
        return None
    value = blockyaml.loads(outside, prune=UNREAD)
    if not isinstance(value, dict) or value.get("items") is not None:
        return None
    value["items"] = [item for part in items for item in part]
    return value


def _read_parts(text: str, parts: list[tuple[int, int]]) -> Optional[list[list[Any]]]:
    import marshal
    import os

    children = []
    for part_start, part_end in parts[1:]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.close(read_end)
                try:
                    data = marshal.dumps(blockyaml.loads(text, part_start, part_end, UNREAD))
                except blockyaml.Unsupported:
                    data = b""
                with os.fdopen(write_end, "wb") as sink:
                    sink.write(data)
                status = 0
            finally:
                # Nothing of the parent's (buffered output, exit handlers) may run twice.
                os._exit(status)
        os.close(write_end)
        children.append((pid, read_end))
    results: list[Any] = []
    try:
        results.append(blockyaml.loads(text, *parts[0], UNREAD))
    except blockyaml.Unsupported:
        results.append(None)
    for pid, read_end in children:
        with os.fdopen(read_end, "rb") as source:
            data = source.read()
        _, status = os.waitpid(pid, 0)
        results.append(marshal.loads(data) if data and status == 0 else None)
    if any(not isinstance(result, list) for result in results):
        return None
    return results


def _read_json(text: str, problems: list[LoadProblem]) -> Parsed:
    from nvidia_oci_hook.formats.parsing import parse_json

    parsed = parse_json(text.encode("utf-8"))
    problems.extend(parsed.problems)
    locator: Locator = (
        _FirstDocument(parsed.locator) if isinstance(parsed.locator, jsontext.Positions) else PositionMap(text)
    )
    if not parsed.ok:
        return Parsed(text, None, False, problems, locator)
    return Parsed(text, [parsed.value], True, [_in_stream(problem) for problem in problems], locator)


def _in_stream(problem: LoadProblem) -> LoadProblem:
    if not problem.pointer:
        return problem
    return LoadProblem(
        problem.code, problem.message, problem.offset, f"/0{problem.pointer}", problem.line, problem.column
    )


class _FirstDocument:
    """A JSON file is a stream of one document: its pointers start with /0."""

    def __init__(self, positions: jsontext.Positions) -> None:
        self.positions = positions

    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]:
        if pointer == "" or pointer == "/0":
            return self.positions.locate("")
        if pointer.startswith("/0/"):
            return self.positions.locate(pointer[2:])
        return None, None

    def line_col(self, offset: int) -> tuple[int, int]:
        return self.positions.line_col(offset)


# ---------------------------------------------------------------------------------------------------------------
# Lines, found on demand


_CHECKPOINT = 1 << 16


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class StreamPositions(LineIndex):
    """pointer -> (line, column) in a YAML stream, found by walking the block structure of the one object the
    pointer is in; a pointer the walk cannot follow (flow collections, anchors, quoted keys) gets the line of the
    deepest node it reached."""

    def __init__(self, text: str, spans: list[tuple[int, int, int]]) -> None:
        super().__init__(text)
        self.spans = spans
        self._items: dict[int, list[int]] = {}
        # The rows before every _CHECKPOINT-th character.
        self._checkpoints: Optional[list[int]] = None

    def locate(self, pointer: str) -> tuple[Optional[int], Optional[int]]:
        tokens = [_unescape(token) for token in pointer.split("/")[1:]]
        if not tokens or not tokens[0].isdigit() or int(tokens[0]) >= len(self.spans):
            return (1, 1) if self.spans else (None, None)
        start, end, _ = self.spans[int(tokens[0])]
        first = self._first_content(start, end)
        if first is None:
            return self.line_col(start)
        walker = _Walk(self.text, first, end)
        offset = walker.follow(tokens[1:], self._item_starts)
        return self.line_col(int(offset))

    def _first_content(self, start: int, end: int) -> Optional[int]:
        """The offset of the document's root node: past a `---` marker line and comment or blank lines."""
        text = self.text
        offset = start
        if text.startswith("---", start):
            rest = text.find("\n", start)
            after = text[start + 3 : rest if rest != -1 else end].strip()
            if after and not after.startswith("#"):
                return start + 3 + (len(text[start + 3 : rest]) - len(text[start + 3 : rest].lstrip()))
            offset = rest + 1 if rest != -1 else end
        while offset < end:
            line_end = text.find("\n", offset, end)
            line_end = end if line_end == -1 else line_end
            stripped = text[offset:line_end].strip()
            if stripped and not stripped.startswith("#"):
                return offset + (len(text[offset:line_end]) - len(text[offset:line_end].lstrip(" ")))
            offset = line_end + 1
        return None

    def _item_starts(self, column: int, start: int, end: int) -> list[int]:
        """The offsets of the dashes of the block sequence whose first dash is at start, in column: one
        regular-expression pass (starting with a line break, which it finds as fast as str.find), kept for a
        `kind: List` whose items many findings are in."""
        cached = self._items.get(start)
        if cached is None:
            shallower = rf" {{0,{column - 1}}}(?=[^\s#])|" if column else ""
            pattern = re.compile(rf"\n(?: {{{column}}}(-)(?=[ \t\n]|$)|{shallower} {{{column}}}(?=[^\s#-]))")
            cached = [start]
            for match in pattern.finditer(self.text, start, end):
                if match.group(1) is None:
                    break
                cached.append(match.start(1))
            self._items[start] = cached
        return cached

    def line_col(self, offset: int) -> tuple[int, int]:
        """Counted from the nearest of a few checkpoints, not from a table of every line of tens of megabytes."""
        if self._checkpoints is None:
            rows = [0]
            text = self.text
            for chunk in range(_CHECKPOINT, len(text) + 1, _CHECKPOINT):
                rows.append(rows[-1] + text.count("\n", chunk - _CHECKPOINT, chunk))
            self._checkpoints = rows
        chunk = offset // _CHECKPOINT
        row = self._checkpoints[chunk] + self.text.count("\n", chunk * _CHECKPOINT, offset)
        return row + 1, offset - (self.text.rfind("\n", 0, offset) + 1) + 1


class _Walk:
    """One pointer followed down a block-style YAML text, line by line from the node it starts at."""

    def __init__(self, text: str, offset: int, end: int) -> None:
        self.text = text
        self.end = end
        self.offset = offset

    def column(self, offset: int) -> int:
        return offset - (self.text.rfind("\n", 0, offset) + 1)

    def line_end(self, offset: int) -> int:
        found = self.text.find("\n", offset, self.end)
        return self.end if found == -1 else found

    def lines_after(self, offset: int) -> Iterator[tuple[int, int]]:
        """(start of the line's content, its indentation) of each content line after the line holding offset."""
        text = self.text
        position = self.line_end(offset) + 1
        while position < self.end:
            line_end = self.line_end(position)
            line = text[position:line_end]
            stripped = line.lstrip(" ")
            if stripped and stripped[0] != "#":
                indent = len(line) - len(stripped)
                yield position + indent, indent
            position = line_end + 1

    def follow(self, tokens: list[str], item_starts: Any) -> int:
        """The offset of the node at tokens below the node at self.offset (a mapping member's key), or of the
        deepest one reached."""
        reported = walked = self.offset
        for token in tokens:
            found = self.child(walked, token, item_starts)
            if found is None:
                return reported
            reported, walked = found
        return reported

    def child(self, node: int, token: str, item_starts: Any) -> Optional[tuple[int, int]]:
        """(where the child is reported, where its node is walked from)."""
        if self.text.startswith("-", node) and self.text[node + 1 : node + 2] in ("", " ", "\t", "\n"):
            if not token.isdigit():
                return None
            found = self.entry(node, int(token), item_starts)
            return None if found is None else (found, found)
        return self.member(node, token)

    def entry(self, node: int, index: int, item_starts: Any) -> Optional[int]:
        column = self.column(node)
        if index > 64:
            starts = item_starts(column, node, self.end)
            return self.entry_content(starts[index]) if index < len(starts) else None
        if index == 0:
            return self.entry_content(node)
        count = 0
        for start, indent in self.lines_after(node):
            if indent < column or (indent == column and not self.text.startswith("-", start)):
                return None
            if indent == column:
                count += 1
                if count == index:
                    return self.entry_content(start)
        return None

    def entry_content(self, dash: int) -> int:
        """A sequence entry's node: after its dash on the same line, else the first line below it."""
        line_end = self.line_end(dash)
        after = dash + 1
        while after < line_end and self.text[after] in " \t":
            after += 1
        if after < line_end and self.text[after] != "#":
            return after
        for start, indent in self.lines_after(dash):
            return start if indent > self.column(dash) else dash
        return dash

    def member(self, node: int, key: str) -> Optional[tuple[int, int]]:
        """The key's offset (where YAML positions put a member) and its value's, in the block mapping whose
        first key is at node."""
        column = self.column(node)
        if self.is_key(node, key):
            return node, self.value_of(node, key)
        for start, indent in self.lines_after(node):
            if indent < column:
                return None
            if indent == column and self.is_key(start, key):
                return start, self.value_of(start, key)
        return None

    def is_key(self, offset: int, key: str) -> bool:
        text = self.text
        for candidate in (key, f'"{key}"', f"'{key}'"):
            if text.startswith(candidate, offset):
                after = offset + len(candidate)
                if text.startswith(":", after) and text[after + 1 : after + 2] in ("", " ", "\t", "\n"):
                    return True
        return False

    def value_of(self, key_offset: int, key: str) -> int:
        """Where the key's value is walked from: its node on the same line, else the first line below it (a
        nested collection), else the key itself."""
        line_end = self.line_end(key_offset)
        colon = self.text.find(":", key_offset + len(key), line_end)
        after = colon + 1
        while after < line_end and self.text[after] in " \t":
            after += 1
        if after < line_end and self.text[after] != "#":
            return after
        column = self.column(key_offset)
        for start, indent in self.lines_after(key_offset):
            if indent > column or (indent == column and self.text.startswith("-", start)):
                return start
            break
        return key_offset
