#!/usr/bin/env python3
"""Writes the key lists of man/node-lifecycled.toml.5 from conf/config.toml.

conf/config.toml is where a key is documented; the man page's per-key items follow from it, so
a key is described once. The hand-written parts of the page (NAME, DESCRIPTION, the prose
around each section, EXAMPLES, ...) stay as they are: only the lines between

    .\\" BEGIN GENERATED KEYS <section>
    .\\" END GENERATED KEYS

are replaced, where <section> is "top" (the keys before the first table) or a table's name
("api", "pool", ...).

What the script reads in conf/config.toml:
- a table header, `[api]`, or a commented-out one, `# [[pool]]`, starts a section;
- a key line, `key = value` (the default) or `# key = value` (an optional key, unset by default,
  with an example value);
- the comment paragraph directly above a key line is its description: the comment lines since
  the last blank line, empty `#` line, header or key line. Earlier paragraphs introduce a
  group of keys and are not copied (the page's own prose says that part);
- `upstream: ...` in that paragraph, to the end of its line, names what the key replaces;
- a key that appears again in a section, with no paragraph of its own, is an example (the
  commented-out example tables) and is skipped; a new key without a paragraph is an error.

Usage: scripts/gen-config-man.py            rewrite man/node-lifecycled.toml.5
       scripts/gen-config-man.py --stdout   print the page it would write
Python 3 standard library only.
"""

import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "conf", "config.toml")
PAGE = os.path.join(ROOT, "man", "node-lifecycled.toml.5")

HEADER = re.compile(r"^(?:#\s*)?\[\[?([a-z_.]+)\]\]?$")
KEY = re.compile(r"^(#\s)?([a-z_]+) = (.*)$")
DURATION = re.compile(r'^"(\d+(\.\d+)?(h|ms|us|ns|m|s))+"$')
UPSTREAM = re.compile(r"(?:^|\s)upstream:\s*(.*)$")
BEGIN = re.compile(r'^\.\\" BEGIN GENERATED KEYS (\S+)$')
END = '.\\" END GENERATED KEYS'


class Key:
    def __init__(self, name, value, optional, text, line):
        self.name = name
        self.value = value
        self.optional = optional
        self.text = text
        self.line = line


def fail(message):
    sys.stderr.write("gen-config-man.py: " + message + "\n")
    sys.exit(1)


def read_keys(path):
    """`section -> [Key]` in the file's order; the keys before the first table are "top"."""
    sections = {"top": []}
    section = "top"
    seen = {"top": set()}
    paragraph = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        line = line.rstrip()
        header = HEADER.match(line)
        key = KEY.match(line)
        if header:
            section = header.group(1)
            sections.setdefault(section, [])
            seen.setdefault(section, set())
            paragraph = []
        elif key:
            commented, name, value = key.groups()
            # A trailing comment is not part of the value.
            value = re.sub(r"\s+#.*$", "", value).strip()
            if paragraph:
                if name in seen[section]:
                    fail("%s:%d: [%s] %s is documented twice" % (path, number, section, name))
                seen[section].add(name)
                sections[section].append(
                    Key(name, value, commented is not None, paragraph, number)
                )
            elif name not in seen[section]:
                fail(
                    "%s:%d: [%s] %s has no comment above it: say what it does there"
                    % (path, number, section, name)
                )
            paragraph = []
        elif line.startswith("#"):
            text = line[1:].strip()
            if text == "" or text.startswith("---"):
                paragraph = []
            else:
                paragraph.append(text)
        else:
            paragraph = []
    return sections


def escape(text):
    """Text as a roff text line: backslashes and non-ASCII escaped, no leading control character."""
    out = []
    for c in text.replace("\\", "\\e"):
        out.append(c if ord(c) < 128 else "\\[u%04X]" % ord(c))
    text = "".join(out)
    # Key names, flags, paths and labels are not hyphenated: a reader looks them up whole.
    text = " ".join("\\%" + w if re.search(r"[_/-]", w) else w for w in text.split(" "))
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def sentences(text):
    """Roff text lines, one sentence a line (roff ends a sentence only at a line's end)."""
    groups = []
    for part in re.split(r"(?<=[.!?])\s+", text):
        if groups and re.search(r"(^|\W)(e\.g|i\.e|etc)\.$", groups[-1][-1]):
            # An abbreviation, not a sentence's end: the same line, its period made plain.
            groups[-1].append(part)
        elif part:
            groups.append([part])
    return [line for group in groups for line in wrap("\\& ".join(escape(p) for p in group))]


def wrap(line):
    """A text line cut at blanks to at most 80 bytes, as mandoc's lint asks (a word longer than
    that stays whole); a piece starting with a control character is made plain text."""
    pieces = textwrap.wrap(line, 80, break_long_words=False, break_on_hyphens=False)
    return ["\\&" + p if p.startswith((".", "'")) else p for p in pieces]


def argument(text):
    """Text as one argument of a macro line: quoted when it has blanks."""
    text = escape(text).replace('"', '\\(dq')
    return '"%s"' % text if " " in text or text == "" else text


def kind(value):
    """What the value is, for the item's tag, read from the value the file shows."""
    if DURATION.match(value):
        return "duration"
    if value in ("true", "false"):
        return "bool"
    if re.match(r"^-?\d+$", value):
        return "integer"
    if re.match(r"^-?\d+\.\d+$", value):
        return "number"
    if value.startswith('"'):
        return "string"
    if value.startswith("["):
        return "array"
    if value.startswith("{"):
        return "table"
    return "value"


def item(key):
    lines = [".It Ic %s No = Ar %s" % (key.name, kind(key.value))]
    upstream = None
    body = []
    for text in key.text:
        found = UPSTREAM.search(text)
        if found and upstream is None:
            upstream = found.group(1).strip()
            text = text[: found.start()].strip()
        if text:
            body.append(text)
    said = " ".join(body)
    lines += sentences(said)
    # A default the comment states itself ("Default: the system roots") is not said twice.
    if not re.search(r"\bDefault\b", said):
        if key.optional:
            lines.append("Default: unset.")
        elif key.value.startswith('"') and key.value.endswith('"'):
            lines += ["Default", ".Qq %s ." % argument(key.value[1:-1])]
        else:
            lines += wrap("Default %s." % escape(key.value))
    if upstream:
        upstream = upstream.rstrip(".")
        lines += wrap("Upstream: %s." % escape(upstream))
    return lines


def generate(page, sections):
    out = []
    done = set()
    lines = page.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        begin = BEGIN.match(line)
        if not begin:
            out.append(line)
            i += 1
            continue
        section = begin.group(1)
        if section not in sections:
            fail("%s: no section [%s] in conf/config.toml" % (PAGE, section))
        if section in done:
            fail("%s: [%s] is generated twice" % (PAGE, section))
        done.add(section)
        try:
            end = lines.index(END, i + 1)
        except ValueError:
            fail("%s: %s without %s" % (PAGE, line, END))
        out.append(line)
        out.append(".Bl -tag -width Ds")
        for key in sections[section]:
            out += item(key)
        out.append(".El")
        out.append(END)
        i = end + 1
    missing = [s for s in sections if s not in done and sections[s]]
    if missing:
        fail(
            "%s: no '.\\\" BEGIN GENERATED KEYS <section>' for %s"
            % (PAGE, ", ".join("[%s]" % s for s in missing))
        )
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    if args not in ([], ["--stdout"]):
        fail("usage: scripts/gen-config-man.py [--stdout]")
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    result = generate(page, read_keys(CONFIG))
    if args == ["--stdout"]:
        sys.stdout.write(result)
    elif result != page:
        with open(PAGE, "w", encoding="utf-8") as f:
            f.write(result)


if __name__ == "__main__":
    main()
