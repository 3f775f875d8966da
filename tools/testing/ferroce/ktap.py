# SPDX-License-Identifier: GPL-2.0
"""The harness's results as KTAP (Documentation/dev-tools/ktap.rst), the format kernel CI
systems read, next to the "PASS name" / "FAIL name" lines of out/results:

    KTAP version 1
    1..2
      KTAP version 1
      # Subtest: module
      1..2
      ok 1 vms-complete
      # the check's message, one diagnostic line per line
      not ok 2 loads
    # module: 14.2 s
    not ok 1 module
    ok 2 cargo-fmt

A scenario is a test whose subtests are its checks; a result named "group/name" or
"group:name" (cargo:..., harness:...) is subtest "name" of test "group"; any other
result is a test of its own. A parent fails when one of its subtests fails. Tests are
written as they finish, so a run that dies leaves fewer than its plan says.
"""

from __future__ import annotations

import re
from typing import TextIO

Result = tuple[str, bool, str]
"""A check's name, whether it passed, and its message (reason, or what it measured)."""

RESULT_LINE = re.compile(r"^(PASS|FAIL) (\S+)")


def description(name: str) -> str:
    """A test's description: any text but "#" and newlines."""
    return " ".join(name.replace("#", "_").split())


def diagnostics(message: str, indent: str) -> list[str]:
    return [f"{indent}# {line}".rstrip() for line in message.rstrip().splitlines()]


def test_lines(number: int, name: str, passed: bool, message: str = "", indent: str = "") -> list[str]:
    """A test without subtests: its message as diagnostic lines, then its result line."""
    return [*diagnostics(message, indent), f"{indent}{'ok' if passed else 'not ok'} {number} {description(name)}"]


def suite_lines(number: int, name: str, results: list[Result], seconds: float | None = None,
                indent: str = "", usage: str | None = None) -> list[str]:
    """A test whose subtests are `results`; it passes when they all do (and there is one).
    `usage`, where its time went, replaces the bare seconds in its diagnostic line."""
    inner = indent + "  "
    lines = [f"{inner}KTAP version 1", f"{inner}# Subtest: {description(name)}", f"{inner}1..{len(results)}"]
    for i, (sub, passed, message) in enumerate(results, 1):
        lines += test_lines(i, sub, passed, message, inner)
    if usage is not None:
        lines.append(f"{indent}# {description(name)}: {usage}")
    elif seconds is not None:
        lines.append(f"{indent}# {description(name)}: {seconds:.1f} s")
    passed = bool(results) and all(ok for _, ok, _ in results)
    lines.append(f"{indent}{'ok' if passed else 'not ok'} {number} {description(name)}")
    return lines


def split(name: str) -> tuple[str | None, str]:
    """("module", "loads") for "module/loads", ("cargo", "x") for "cargo:x", (None, name) else."""
    m = re.match(r"^([^/:]+)[/:](.+)$", name)
    return (m.group(1), m.group(2)) if m else (None, name)


def grouped(results: list[Result]) -> list[tuple[str, list[Result] | None, Result | None]]:
    """Results as top-level tests, in the order their first result came: (group, its
    subtests, None) for grouped names, (name, None, result) for the others."""
    tests: list[tuple[str, list[Result] | None, Result | None]] = []
    groups: dict[str, list[Result]] = {}
    for name, passed, message in results:
        group, sub = split(name)
        if group is None:
            tests.append((name, None, (name, passed, message)))
        elif group in groups:
            groups[group].append((sub, passed, message))
        else:
            groups[group] = [(sub, passed, message)]
            tests.append((group, groups[group], None))
    return tests


def parse_results(text: str) -> list[Result]:
    """The results of an out/results file ("PASS name" / "FAIL name" lines)."""
    return [(m.group(2), m.group(1) == "PASS", "") for m in map(RESULT_LINE.match, text.splitlines()) if m]


class Writer:
    """A KTAP file written test by test: the plan first, each test when it is done."""

    def __init__(self, out: TextIO, planned: int) -> None:
        self.out = out
        self.number = 0
        self._write(["KTAP version 1", f"1..{planned}"])

    def _write(self, lines: list[str]) -> None:
        self.out.write("".join(line + "\n" for line in lines))
        self.out.flush()

    def test(self, name: str, passed: bool, message: str = "") -> None:
        self.number += 1
        self._write(test_lines(self.number, name, passed, message))

    def suite(self, name: str, results: list[Result], seconds: float | None = None,
              usage: str | None = None) -> None:
        self.number += 1
        self._write(suite_lines(self.number, name, results, seconds, usage=usage))

    def results(self, results: list[Result]) -> None:
        """Results as `grouped` makes them tests."""
        for name, subtests, result in grouped(results):
            if subtests is None:
                self.test(*result)
            else:
                self.suite(name, subtests)


def planned(results: list[Result]) -> int:
    """How many top-level tests `Writer.results` makes of `results`."""
    return len(grouped(results))
