#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Which states of the NIC's transport the fuzz corpus reaches, from llvm-cov's line counts.

Usage: states.py SHOW_DIR (llvm-cov show --format=text --output-dir output: one file per
source). Prints one line per state (reached or not, and how often) and a summary, and exits
1 if a state was never reached.

What a state is comes from the code itself, not from a list here:
- the responder: each variant of `enum RespState` (responder.rs) has an arm in
  `Request::step`; the state was reached as often as its arm ran;
- the requester: each variant of `enum GoBack` (requester.rs), the reasons it sends again, is
  reached where the requester or the completer goes back with it (a line naming
  `GoBack::X` outside a `match` arm);
- the completer: each function of completer.rs, a way a response is handled, as often as it
  was entered.
"""

import re
import sys
from pathlib import Path

ENGINE = "tools/ferroce-nic/src/engine"


def counts(show_dir, source):
    """{line number: (count or None, text)} of `source` in llvm-cov's text output."""
    matches = list(Path(show_dir).rglob(source.split("/")[-1] + ".txt"))
    matches = [m for m in matches if str(m).endswith(source + ".txt")]
    if not matches:
        sys.exit(f"states: no coverage of {source} in {show_dir}")
    out = {}
    for line in matches[0].read_text().splitlines():
        m = re.match(r"^\s*(\d+)\|\s*([0-9.]+[kMG]?|)\|(.*)$", line)
        if not m:
            continue
        number, count, text = int(m.group(1)), m.group(2), m.group(3)
        out[number] = (parse_count(count) if count else None, text)
    return out


def parse_count(text):
    scale = {"k": 1e3, "M": 1e6, "G": 1e9}
    if text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(text)


def variants(lines, enum):
    """The variants of `enum` in `lines` (by their declaration lines)."""
    inside, out = False, []
    for _, (_, text) in sorted(lines.items()):
        if re.match(rf"^\s*(pub\s+)?enum {enum}\b", text):
            inside = True
            continue
        if inside:
            if re.match(r"^}", text):
                break
            m = re.match(r"^    ([A-Z]\w*)\b", text)
            if m:
                out.append(m.group(1))
    return out


def body_of(lines, signature):
    """Line numbers of the function whose signature matches `signature`."""
    start = next(n for n, (_, t) in sorted(lines.items()) if re.search(signature, t))
    indent = len(lines[start][1]) - len(lines[start][1].lstrip())
    body = []
    for n in sorted(k for k in lines if k > start):
        text = lines[n][1]
        body.append(n)
        if text.strip() == "}" and len(text) - len(text.lstrip()) == indent:
            break
    return body


def responder(show_dir):
    lines = counts(show_dir, f"{ENGINE}/responder.rs")
    step = body_of(lines, r"fn step\(&mut self, state: RespState\)")
    out = []
    for v in variants(lines, "RespState"):
        if v == "Done":
            continue  # not a step: the loop ends there
        arms = [lines[n][0] or 0 for n in step
                if re.match(rf"^\s*{v}\b[^|]*=>", lines[n][1])]
        if not arms:
            sys.exit(f"states: RespState::{v} has no arm in Request::step")
        out.append((f"responder {v}", max(arms)))
    return out


def requester(show_dir):
    sources = [f"{ENGINE}/requester.rs", f"{ENGINE}/completer.rs"]
    all_lines = [counts(show_dir, s) for s in sources]
    out = []
    for v in variants(all_lines[0], "GoBack"):
        uses = [c or 0 for lines in all_lines for (c, t) in lines.values()
                if f"GoBack::{v}" in t and "=>" not in t]
        if not uses:
            sys.exit(f"states: GoBack::{v} is never used outside a match")
        out.append((f"requester go-back {v}", max(uses)))
    return out


def completer(show_dir):
    lines = counts(show_dir, f"{ENGINE}/completer.rs")
    out = []
    for n, (c, t) in sorted(lines.items()):
        m = re.match(r"^(pub\s+)?fn (\w+)", t)
        if m:
            out.append((f"completer {m.group(2)}", c or 0))
    return out


def main():
    show_dir = sys.argv[1]
    states = responder(show_dir) + requester(show_dir) + completer(show_dir)
    missed = [name for name, c in states if c == 0]
    for name, c in states:
        print(f"{'reached' if c else 'MISSED ':7} {c:>10}  {name}")
    print(f"{len(states) - len(missed)} of {len(states)} transport states reached"
          + (f"; not reached: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
