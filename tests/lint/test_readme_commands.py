#!/usr/bin/env python3
"""Usage: test_readme_commands.py SOURCE_ROOT

Every command that README.md or a page in docs/ (docs/*.md) tells users to type and that starts
with one of the project's own files (`scripts/gpu_check.sh --cpu`, `.ci/run`) must name a file
that exists, starts with `#!` and is executable as git stores it (mode 100755): a fresh clone gets
git's mode, not the developer's checkout's. Paths in commands are relative to the repository root,
wherever the page lives. Commands are the lines of ```bash code blocks and inline code spans that run a script
with arguments (`scripts/to_yolov5.py A B`) or are a shell script alone (`scripts/gpu_check.sh`);
a bare `x.py` in prose names a file, and so does a bare file under tests/ (ctest runs those, as
`tests/lint/test_layers.sh (ctest lint_layers)` in docs/ARCHITECTURE.md says). A file run through an interpreter (`bash x.sh`,
`python3 x.py`) needs no execute bit and is not checked.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

SOURCE_DIRS = ("scripts/", ".ci/", "tests/", "apps/", "utils/", "models/", "data/", "configs/")


def commands(text):
    """Yields (line number, command text) for shell code-block lines and inline code spans."""
    fence = None  # the open block's language
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else line.strip()[3:].strip()
            continue
        if fence is not None:
            if fence in ("bash", "sh", "shell", "console"):
                yield n, line
        else:
            for span in re.findall(r"`([^`]+)`", line):
                bare = len(span.split()) == 1
                if not bare or not (span.endswith(".py") or span.startswith(("tests/", "./tests/"))):
                    yield n, span


def first_words(command):
    """The program of each part of a shell command line (after env assignments)."""
    command = re.sub(r"(^|\s)#.*$", "", command)
    for part in re.split(r"&&|\|\||[;|(){}]", command):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        if words:
            yield words[0]


def is_script(root, path):
    """A shell or Python script, or an extension-less file (`.ci/run`); not folders or data."""
    ext = os.path.splitext(path)[1]
    if ext in (".sh", ".py"):
        return True
    return ext == "" and os.path.isfile(os.path.join(root, path))


def git_modes(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-s"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout (an unpacked archive): the files' own modes count
    modes = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]
    return modes


def pages(root):
    """README.md and docs/*.md, as paths relative to root (README.md first, then sorted)."""
    docs = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return ["README.md"] + [p.replace(os.sep, "/") for p in docs]


def page_commands(root):
    """Yields (page, line number, command text) over README.md and every docs/*.md."""
    for page in pages(root):
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        for n, command in commands(text):
            yield page, n, command


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    if not os.path.isfile(os.path.join(root, "README.md")):
        print(f"FAIL: no README.md in {root}")
        return 1
    modes = git_modes(root)
    problems, checked = [], set()
    for page, n, command in page_commands(root):
        for word in first_words(command):
            path = word[2:] if word.startswith("./") else word
            if not path.startswith(SOURCE_DIRS) or path in checked or not is_script(root, path):
                continue
            checked.add(path)
            full = os.path.join(root, path)
            where = f"{page}:{n}: `{command.strip()}`"
            if not os.path.isfile(full):
                problems.append(f"{where} runs {path}, which does not exist")
                continue
            with open(full, "rb") as f:
                if f.read(2) != b"#!":
                    problems.append(f"{where} runs {path}, which has no #! line")
            if modes is not None:
                mode = modes.get(path)
                if mode != "100755":
                    problems.append(f"{where} runs {path}, stored in git as mode {mode or 'untracked'}"
                                    f"; fix: git update-index --chmod=+x {path}")
            elif not os.access(full, os.X_OK):
                problems.append(f"{where} runs {path}, which is not executable; fix: chmod +x {path}")
    for p in problems:
        print(p)
    if problems:
        print(f"FAIL: {len(problems)} documented command(s) would not run on a fresh clone")
        return 1
    if not checked:
        print("FAIL: found no commands in README.md or docs/*.md that run the project's files")
        return 1
    print(f"README and docs commands ok ({len(pages(root))} pages): {len(checked)} files run "
          "directly, all executable in git: "
          + ", ".join(sorted(checked)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
