#!/usr/bin/python3
"""Every command line README.md and docs/*.md show parses: each vidfeat invocation in their code
(indented blocks and fences; synopsis lines with [options], A|B or ... are not invocations) is
run with --help appended, which the command reads after every other option, so that an unknown
option, a value it refuses or an unknown command fails it; each scripts/ program they name
exists and is executable; and every long option any command's --help lists (the option table,
src/cli/options.c) is named in the man page, docs/vidfeat.1, and in docs/commands.md's tables.

usage: check-doc-commands.py VIDFEAT SOURCE_DIR      (exit 0: all parse; 1: the ones that do not)
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]+$")  # COMMAND, FILE: a synopsis, not a command line


def code_lines(path):
    """(line number, text) of the code in a Markdown file: indented blocks and fences."""
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            yield n, line.strip()


def segments(line):
    """The simple commands of a shell line (split at &&, ||, ;, | and redirections), as words;
    None when the line is not shell (Python, SQL, a table)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return None
    out, cur, skip_next = [], [], False
    for w in words:
        if skip_next:  # the file after a redirection
            skip_next = False
            continue
        if w in ("&&", "||", ";", "|", "&"):
            out.append(cur)
            cur = []
        elif w in (">", ">>", "<", "2>"):
            skip_next = True
        else:
            cur.append(w)
    out.append(cur)
    return [s for s in out if s]


def man_page_gaps(exe, page, cwd):
    """Long options some command's --help lists that the man page, or docs/commands.md's
    tables, do not name."""
    r = subprocess.run([exe], capture_output=True, text=True, cwd=cwd, timeout=60)
    lines = r.stderr.splitlines()
    start = lines.index("commands:") + 1 if "commands:" in lines else len(lines)
    commands = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        commands.append(line.split()[0])
    options = set()
    for cmd in commands:
        r = subprocess.run([exe, cmd, "--help"], capture_output=True, text=True, cwd=cwd,
                           timeout=60)
        for line in r.stdout.splitlines():
            m = re.match(r"^\s+(?:-\w, )?--([a-z0-9-]+)", line)
            if m:
                options.add(m.group(1))
    text = open(page, encoding="utf-8").read()
    gaps = ["docs/vidfeat.1: --%s (a long option) is not in the man page" % o
            for o in sorted(options) if "\\-\\-" + o.replace("-", "\\-") not in text]
    # docs/commands.md: in a table row (a line starting with "|"), as --NAME not followed by
    # another letter of a longer option's name
    rows = "\n".join(l for l in open(os.path.join(os.path.dirname(page), "commands.md"),
                                      encoding="utf-8") if l.startswith("|"))
    gaps += ["docs/commands.md: --%s (a long option) is in no table there" % o for o in
             sorted(options) if not re.search(r"--%s(?![a-z0-9-])" % re.escape(o), rows)]
    if len(commands) < 5 or len(options) < 20:
        gaps.append("the commands and options could not be read from vidfeat's help")
    return gaps


def main():
    exe, src = os.path.abspath(sys.argv[1]), sys.argv[2]
    docs = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    bad, checked, scripts = [], 0, set()
    with tempfile.TemporaryDirectory(prefix="vidfeat_docs_") as tmp:
        for doc in docs:
            name = os.path.relpath(doc, src)
            for n, line in code_lines(doc):
                for words in segments(line) or []:
                    while words and "=" in words[0] and not words[0].startswith("-"):
                        words = words[1:]  # VAR=value before the program
                    if not words:
                        continue
                    prog = words[0]
                    if prog.startswith("scripts/"):
                        path = os.path.join(src, prog)
                        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                            bad.append("%s:%d: %s is not an executable script" % (name, n, prog))
                        scripts.add(prog)
                        continue
                    if prog != "vidfeat" and not prog.endswith("/vidfeat"):
                        continue
                    args = words[1:]
                    if any(a.startswith("[") or "|" in a or "..." in a or PLACEHOLDER.match(a)
                           for a in args):
                        continue  # a synopsis
                    r = subprocess.run([exe, *args, "--help"], capture_output=True, text=True,
                                       cwd=tmp, timeout=60, env=dict(os.environ, LC_ALL="C"))
                    checked += 1
                    if r.returncode != 0:
                        bad.append("%s:%d: vidfeat %s: exit %d: %s" % (
                            name, n, " ".join(args), r.returncode, r.stderr.strip()[:300]))
        bad += man_page_gaps(exe, os.path.join(src, "docs", "vidfeat.1"), tmp)
    for b in bad:
        print("FAIL " + b)
    print("%d vidfeat command lines of %d files parse; %d scripts named exist and run%s"
          % (checked - sum(": exit " in b for b in bad), len(docs), len(scripts),
             "" if not bad else "; %d problems" % len(bad)))
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
