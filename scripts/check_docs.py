#!/usr/bin/env python3
"""Checks README.md and the book (docs/src/) against the repository. Run by `make docs`.

  links      every relative link and image resolves to a file of the repository, and every
             `#anchor` to a heading of its target (mdBook's ids: lowercase, spaces to '-',
             other punctuation dropped)
  commands   every command shown in a shell code block (```sh, ```bash, ```shell: every line;
             any block: lines starting with `$ `) is one the repository has: `make X` names a
             target of the Makefile; a subcommand or `--flag` of `workflow-operator`,
             `kubectl workflow` or `workflow-runner` appears in a test (host/tests, runner/tests,
             tests/); a path in the repository it names exists
  summary    every chapter of docs/src/ is listed in SUMMARY.md

Prints each problem as `FILE:LINE: what` and exits 1 when there is one.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img\s[^>]*src=\"([^\"]+)\"")
INLINE_CODE = re.compile(r"`[^`]*`")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
SHELL_BLOCKS = {"sh", "bash", "shell"}
MAKEFILES = ["Makefile", "tests/cluster/cluster.mk"]
TEST_DIRS = ["host/tests", "runner/tests", "tests"]
# Of the programs checked, the subcommands that take a subcommand of their own.
NESTED_SUBCOMMANDS = {"plugin"}
# Shown commands that no test runs yet, each with why it stays shown. Printed on every run, so the
# gap stays in sight; remove an entry once a test runs the command.
NOT_RUN_BY_A_TEST_YET = {}


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    src = os.path.join(root, "docs", "src")
    files += sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".md"))
    return files


def classified_lines(text):
    """(line number, line, block) of each line but the fences: block is None outside a fenced
    code block, else (the block's opening line number, its language or "")."""
    block = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and block is None:
            block, fence = (number, m.group(2).lower()), m.group(1)[0] * 3
        elif m and block is not None and m.group(1).startswith(fence) and not m.group(2):
            block = None
        else:
            yield number, line, block


def lines_outside_code(text):
    """(line number, line) of the lines that are not inside a fenced code block."""
    return ((number, line) for number, line, block in classified_lines(text) if block is None)


def code_blocks(text):
    """(language, [(line number, line)]) of each fenced code block."""
    blocks = {}
    for number, line, block in classified_lines(text):
        if block is not None:
            blocks.setdefault(block, []).append((number, line))
    return [(language, lines) for (_, language), lines in blocks.items()]


def heading_ids(text):
    """The ids mdBook gives the headings of `text`, repeated names numbered as it does."""
    ids, seen = set(), {}
    for _, line in lines_outside_code(text):
        m = HEADING.match(line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).replace("`", "")
        title = title.replace("**", "").replace("*", "")
        base = "".join(
            "-" if c.isspace() else c.lower() for c in title if c.isalnum() or c in "_-" or c.isspace()
        )
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def check_links(path, text, root, problems):
    for number, line in lines_outside_code(text):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            target = m.group(1) or m.group(2)
            if SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not resolved.startswith(root + os.sep) and resolved != root:
                problems.append((path, number, f"link {target} leaves the repository"))
            elif not os.path.exists(resolved):
                problems.append((path, number, f"link {target}: no such file {os.path.relpath(resolved, root)}"))
            elif anchor and resolved.endswith(".md"):
                with open(resolved, encoding="utf-8") as f:
                    if anchor not in heading_ids(f.read()):
                        problems.append((path, number, f"link {target}: no heading #{anchor} in {os.path.relpath(resolved, root)}"))


def shown_commands(text):
    """(line number, command line) of each command shown in a shell block, continuations joined."""
    for language, lines in code_blocks(text):
        pending, first = "", 0
        for number, line in lines:
            if line.startswith("$ "):
                line = line[2:]
            elif language not in SHELL_BLOCKS and not pending:
                continue
            if not pending:
                first = number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command, pending = (pending + line).strip(), ""
            if command and not command.startswith("#"):
                yield first, command


def words(command):
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote: split at spaces, the comment dropped
        return command.split(" #")[0].split()


def simple_commands(command):
    """The simple commands of a command line, each as its words, assignments and sudo dropped."""
    current = []
    for word in words(command) + [";"]:
        if word in ("&&", "||", "|", ";"):
            while current and (re.match(r"^\w+=", current[0]) or current[0] == "sudo"):
                current.pop(0)
            if current:
                yield current
            current = []
        else:
            current.append(word)


def make_targets(root):
    targets = set()
    for makefile in MAKEFILES:
        with open(os.path.join(root, makefile), encoding="utf-8") as f:
            targets.update(re.findall(r"^([a-zA-Z0-9][\w.-]*)\s*:(?!=)", f.read(), re.MULTILINE))
    return targets


def test_text(root):
    """Every test file's text, joined: what a subcommand or flag must appear in."""
    parts = []
    for directory in TEST_DIRS:
        for dirpath, _, filenames in os.walk(os.path.join(root, directory)):
            for name in filenames:
                try:
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        parts.append(f.read())
                except (UnicodeDecodeError, OSError):
                    continue
    return "\n".join(parts)


def tracked_top_dirs(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True)
    return {p.split("/", 1)[0] for p in out.stdout.splitlines() if "/" in p}


def check_command(argv, tests, targets, top_dirs, root, notes):
    """What is wrong with one simple command (a list of words), as messages; what no test runs
    yet but is allowed, in `notes`."""
    program, args = argv[0], argv[1:]
    if program == "kubectl" and args[:1] == ["workflow"]:
        program, args = "kubectl workflow", args[1:]
    problems = []
    if program == "make":
        for target in (a for a in args if not a.startswith("-") and "=" not in a):
            if target not in targets:
                problems.append(f"make {target}: no such target in {' or '.join(MAKEFILES)}")
    if program in ("workflow-operator", "kubectl workflow", "workflow-runner"):
        options = args[: args.index("--")] if "--" in args else args
        positional = [a for a in options if not a.startswith("-")]
        subcommands = [] if program == "workflow-runner" else positional[:1]
        if subcommands and subcommands[0] in NESTED_SUBCOMMANDS:
            subcommands = positional[:2]
        for sub in subcommands:
            if f'"{sub}"' not in tests:
                problems.append(f"{program} {sub}: no test runs this subcommand")
        for flag in (a.split("=", 1)[0] for a in options if a.startswith("--")):
            if (program, flag) in NOT_RUN_BY_A_TEST_YET:
                notes.append(f"{program} {flag}: {NOT_RUN_BY_A_TEST_YET[(program, flag)]}")
            elif not re.search(re.escape(flag) + r"(?![\w-])", tests):
                problems.append(f"{program} {flag}: no test uses this flag")
    for word in argv:
        path = word.split("=")[-1].strip("<()\"'")
        if ":" in path or "$" in path or path.split("/", 1)[0] not in top_dirs or "/" not in path:
            continue
        if not os.path.exists(os.path.join(root, path)):
            problems.append(f"{path}: no such file")
    return problems


def check_commands(path, text, tests, targets, top_dirs, root, problems, notes):
    for number, command in shown_commands(text):
        for argv in simple_commands(command):
            found = []
            for problem in check_command(argv, tests, targets, top_dirs, root, found):
                problems.append((path, number, problem))
            notes.extend((path, number, note) for note in found)


def check_summary(root, problems):
    src = os.path.join(root, "docs", "src")
    summary = os.path.join(src, "SUMMARY.md")
    with open(summary, encoding="utf-8") as f:
        listed = set(re.findall(r"\]\(([^)#]+)\)", f.read()))
    for name in sorted(os.listdir(src)):
        if name.endswith(".md") and name != "SUMMARY.md" and name not in listed:
            problems.append((summary, 1, f"{name} is not listed"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the repository (default: the one this script is in)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    tests, targets, top_dirs = test_text(root), make_targets(root), tracked_top_dirs(root)
    problems, notes = [], []
    for path in markdown_files(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        check_links(path, text, root, problems)
        check_commands(path, text, tests, targets, top_dirs, root, problems, notes)
    check_summary(root, problems)
    for path, number, what in notes:
        print(f"{os.path.relpath(path, root)}:{number}: not run by a test yet: {what}", file=sys.stderr)
    for path, number, what in problems:
        print(f"{os.path.relpath(path, root)}:{number}: {what}")
    files = len(markdown_files(root))
    print(f"check_docs: {files} files, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
