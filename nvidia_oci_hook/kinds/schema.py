"""The project's own JSON Schemas: loading, a fast verdict, and jsonschema's explanations.

Each document kind has one self-contained schema file under schemas/ (draft-07, only internal "#/definitions"
references). jsonschema is the authority: it produces every message. Because it walks a 10,000-device config
in about half a second, a document is first checked by a closure tree compiled from the same schema file; only a
document that this fast check rejects is handed to jsonschema. The test suite holds both verdicts equal to each
other and to the upstream runtime-spec schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any, Callable

from nvidia_oci_hook.findings import Problem
from nvidia_oci_hook.formats.jsontext import pointer_join

SCHEMA_FILES = {
    "oci": "oci-config.schema.json",
    "oci-state": "oci-state.schema.json",
}

Check = Callable[[Any], bool]

# Keywords that carry no constraint.
_ANNOTATION_KEYWORDS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "definitions", "examples", "default"}
)


def load_schema(kind: str) -> dict[str, Any]:
    text = resources.files("nvidia_oci_hook.kinds").joinpath(f"schemas/{SCHEMA_FILES[kind]}").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _is_integer(value: Any) -> bool:
    # Go's decoder refuses 1.0 for an int field, as draft-04 (the upstream schemas' draft) does.
    return isinstance(value, int) and not isinstance(value, bool)


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


@cache
def validator_for(kind: str) -> Any:
    """A jsonschema validator for kind, with draft-04's integer semantics (what Go's decoder enforces)."""
    import jsonschema

    base = jsonschema.Draft7Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: _is_integer(value))
    schema = load_schema(kind)
    base.check_schema(schema)
    # Our schemas refer only inside themselves (the fast check refuses anything else): each reference is looked up
    # once. jsonschema 4.18 and later otherwise ask the referencing registry on every use, which makes a large
    # document's validation several times slower; the errors are the same, since the same subschema is descended.
    targets: dict[str, Any] = {}

    def internal_ref(validator: Any, ref: str, instance: Any, _schema: Any) -> Any:
        if ref not in targets:
            targets[ref] = _pointer_target(schema, ref)
        yield from validator.descend(instance, targets[ref])

    validator_class = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, validators={"$ref": internal_ref}, type_checker=checker
    )
    return validator_class(schema)


def _pointer_target(root: Any, ref: str) -> Any:
    if not ref.startswith("#/"):
        raise ValueError(f"only internal references are supported, not {ref!r}")
    node = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


class _Compiler:
    """Turns a schema into nested closures returning only valid / invalid."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if target not in self.refs:
            node = _pointer_target(self.root, target)
            slot: list[Check] = []
            self.refs[target] = lambda value: slot[0](value)
            slot.append(self.compile(node))
        return self.refs[target]

    def compile(self, node: Any) -> Check:
        if node is True or node == {}:
            return lambda value: True
        if node is False:
            return lambda value: False
        checks: list[Check] = []
        for keyword, argument in node.items():
            if keyword in _ANNOTATION_KEYWORDS:
                continue
            build = getattr(self, "k_" + keyword.lstrip("$"), None)
            if build is None:
                raise ValueError(f"schema keyword {keyword!r} is not supported by the fast check")
            checks.append(build(argument, node))
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    def k_ref(self, target: str, _node: Any) -> Check:
        return self.ref(target)

    def k_type(self, names: Any, _node: Any) -> Check:
        tests = [_TYPE_TESTS[name] for name in ([names] if isinstance(names, str) else names)]
        if len(tests) == 1:
            return tests[0]
        return lambda value: any(test(value) for test in tests)

    def k_properties(self, properties: dict[str, Any], _node: Any) -> Check:
        compiled = [(name, self.compile(sub)) for name, sub in properties.items()]

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for name, sub in compiled:
                if name in value and not sub(value[name]):
                    return False
            return True

        return check

    def k_patternProperties(self, patterns: dict[str, Any], _node: Any) -> Check:
        compiled = [(re.compile(pattern).search, self.compile(sub)) for pattern, sub in patterns.items()]

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            return all(sub(item) for key, item in value.items() for search, sub in compiled if search(key))

        return check

    def k_additionalProperties(self, sub_schema: Any, node: Any) -> Check:
        sub = self.compile(sub_schema)
        named = frozenset(node.get("properties", ()))
        searches = [re.compile(pattern).search for pattern in node.get("patternProperties", ())]

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for key, item in value.items():
                if key in named or any(search(key) for search in searches):
                    continue
                if not sub(item):
                    return False
            return True

        return check

    def k_required(self, names: list[str], _node: Any) -> Check:
        return lambda value: not isinstance(value, dict) or all(name in value for name in names)

    def k_items(self, sub_schema: Any, _node: Any) -> Check:
        if isinstance(sub_schema, list):
            # Tuple form: item i against schema i. Without additionalItems (which the fast check does not
            # support, so no schema here has it) the items past the list are free, as draft-04 and draft-07 say.
            subs = [self.compile(sub) for sub in sub_schema]
            return lambda value: not isinstance(value, list) or all(sub(item) for sub, item in zip(subs, value))
        sub = self.compile(sub_schema)
        return lambda value: not isinstance(value, list) or all(sub(item) for item in value)

    def k_minItems(self, count: int, _node: Any) -> Check:
        return lambda value: not isinstance(value, list) or len(value) >= count

    def k_maxItems(self, count: int, _node: Any) -> Check:
        return lambda value: not isinstance(value, list) or len(value) <= count

    def k_minLength(self, count: int, _node: Any) -> Check:
        return lambda value: not isinstance(value, str) or len(value) >= count

    def k_enum(self, choices: list[Any], _node: Any) -> Check:
        # JSON equality: 1 and true differ, 1 and 1.0 do not (as jsonschema decides).
        def same(a: Any, b: Any) -> bool:
            if isinstance(a, bool) or isinstance(b, bool):
                return a is b
            return bool(a == b)

        return lambda value: any(same(value, choice) for choice in choices)

    def k_const(self, constant: Any, node: Any) -> Check:
        return self.k_enum([constant], node)

    def k_pattern(self, pattern: str, _node: Any) -> Check:
        search = re.compile(pattern).search
        return lambda value: not isinstance(value, str) or search(value) is not None

    def k_minimum(self, bound: Any, _node: Any) -> Check:
        return lambda value: not _is_number(value) or value >= bound

    def k_maximum(self, bound: Any, _node: Any) -> Check:
        return lambda value: not _is_number(value) or value <= bound

    def k_allOf(self, schemas: list[Any], _node: Any) -> Check:
        subs = [self.compile(sub) for sub in schemas]
        return lambda value: all(sub(value) for sub in subs)

    def k_anyOf(self, schemas: list[Any], _node: Any) -> Check:
        subs = [self.compile(sub) for sub in schemas]
        return lambda value: any(sub(value) for sub in subs)

    def k_oneOf(self, schemas: list[Any], _node: Any) -> Check:
        subs = [self.compile(sub) for sub in schemas]
        return lambda value: sum(1 for sub in subs if sub(value)) == 1

    def k_not(self, sub_schema: Any, _node: Any) -> Check:
        sub = self.compile(sub_schema)
        return lambda value: not sub(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@cache
def fast_check(kind: str) -> Check:
    schema = load_schema(kind)
    return _Compiler(schema).compile(schema)


def _describe(error: Any) -> str:
    message = str(error.message)
    if len(message) > 300:
        message = message[:297] + "..."
    description = error.schema.get("description") if isinstance(error.schema, dict) else None
    if isinstance(description, str) and error.validator != "required":
        # The schema's own words say what the value is for; its first sentence is enough.
        message += f" ({description.split('. ')[0].rstrip('.')})"
    return message


def schema_problems(kind: str, value: Any) -> Iterator[Problem]:
    """Every way value breaks the kind's schema; nothing when it conforms."""
    if kind not in SCHEMA_FILES or fast_check(kind)(value):
        return
    errors = sorted(validator_for(kind).iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        pointer = ""
        for part in error.absolute_path:
            pointer = pointer_join(pointer, part)
        yield Problem(pointer, _describe(error))
