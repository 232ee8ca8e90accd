"""`why TEXT`: from the error a user has (a pod event, an engine's log line, a hook's stderr) to its cause on the node.

- `reading`: the paste made into the views signatures are matched against (escapes, log prefixes, wrapping);
- `signatures`: every error recognised, its text as its tool writes it, where, and its causes;
- `deciders`: each signature's causes decided from what the error names;
- `causes`: the verdict type and the node's evidence (doctor's checks, `lint --node`, `cdi resolve`, the driver),
  each read once, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.node.locations import ByHand
from nvidia_oci_hook.node.why.causes import Cause, Node
from nvidia_oci_hook.node.why.reading import TEXT_LIMIT, views
from nvidia_oci_hook.node.why.signatures import SIGNATURES, Signature

__all__ = ["TEXT_LIMIT", "Report", "explain_text", "recognise", "render_text"]

# How much of a match is quoted back.
_QUOTE_LIMIT = 300
# Per cause in the text report: the rest is in --format json.
_EVIDENCE_LINES = 4


@dataclass
class Match:
    signature: Signature
    text: str
    groups: dict[str, str]


@dataclass
class Report:
    matches: list[Match] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)

    @property
    def recognized(self) -> bool:
        return bool(self.matches)

    @property
    def holds(self) -> bool:
        return any(cause.holds for cause in self.causes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "recognized": self.recognized,
            "matches": [{"signature": match.signature.id, "text": match.text} for match in self.matches],
            "causes": [cause.as_dict() for cause in self.causes],
            "undecided": self.undecided,
        }


def recognise(text: str) -> list[Match]:
    """Every signature found in the text, once per distinct value of what it names."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], Match] = {}
    for view in views(text):
        hits = [(hit, signature) for signature in SIGNATURES for hit in signature.pattern.finditer(view)]
        hits.sort(key=lambda pair: (pair[0].start(), -pair[0].end()))
        # Per signature, the furthest end of its hits so far (and the earliest start with that end): a hit inside
        # another signature's is part of that error's text, as runc's `error mounting "..." ...: stat PATH: no
        # such file` holds a stat error that is not a second error.
        reach: dict[str, tuple[int, int]] = {}
        for hit, signature in hits:
            inside = any(
                end > hit.end() or (end == hit.end() and start < hit.start())
                for other, (end, start) in reach.items()
                if other != signature.id
            )
            if hit.end() > reach.get(signature.id, (-1, 0))[0]:
                reach[signature.id] = (hit.end(), hit.start())
            if inside:
                continue
            groups = {name: value for name, value in hit.groupdict().items() if value is not None}
            key = (signature.id, tuple(sorted(groups.items())))
            if key not in found:
                quoted = hit.group(0).strip()
                if len(quoted) > _QUOTE_LIMIT:
                    quoted = quoted[: _QUOTE_LIMIT - 3] + "..."
                found[key] = Match(signature, quoted, groups)
    order = {signature.id: index for index, signature in enumerate(SIGNATURES)}
    return sorted(found.values(), key=lambda match: order[match.signature.id])


def explain_text(text: str, host_root: str, settings: Settings, by_hand: Optional[ByHand] = None) -> Report:
    """by_hand: engine configuration files named on the command line, read where they are."""
    report = Report(recognise(text))
    node = Node(host_root, settings, by_hand)
    seen: set[tuple[str, str]] = set()
    for match in report.matches:
        try:
            causes = match.signature.decide(node, match.groups)
        except Exception as exc:  # the node or our own bug: say what was left open, never a traceback
            report.undecided.append(
                f"{match.signature.id}: its causes could not be decided here ({type(exc).__name__}: {exc})"
            )
            continue
        for cause in causes:
            if (cause.code, cause.summary) not in seen:
                seen.add((cause.code, cause.summary))
                report.causes.append(cause)
        for line in match.signature.undecided(match.groups):
            if line not in report.undecided:
                report.undecided.append(line)
    rank = {True: 0, None: 1, False: 2}
    report.causes.sort(key=lambda cause: rank[cause.holds])
    return report


_VERDICT = {True: "holds", None: "not decidable here", False: "ruled out"}


def render_text(report: Report, node_root: str = "") -> str:
    if not report.recognized:
        return (
            "not recognised: no error this tool can explain was found in the text\n"
            "(nvidia-oci-hook lint --node and nvidia-oci-hook doctor check the node without one)\n"
        )
    lines = []
    for match in report.matches:
        lines.append(f"recognised {match.signature.id}: {match.signature.title}")
        lines.append(f'    "{match.text}"')
        lines.append(f"    (written by {match.signature.source})")
    for cause in report.causes:
        lines.append(f"[{_VERDICT[cause.holds]}] {cause.code}: {cause.summary}")
        if cause.holds is not False:
            shown = cause.evidence[:_EVIDENCE_LINES]
            lines.extend(f"    {line}" for line in shown)
            if len(cause.evidence) > len(shown):
                lines.append(f"    ... {len(cause.evidence) - len(shown)} more (--format json)")
            if cause.fix:
                lines.append(f"    fix: {cause.fix}")
    for line in report.undecided:
        lines.append(f"not decided here: {line}")
    held = sum(1 for cause in report.causes if cause.holds)
    tail = f"{held} of {len(report.causes)} causes hold on this node"
    lines.append(tail + (f" (read under {node_root})" if node_root else ""))
    return "\n".join(lines) + "\n"
