"""Deterministic entity extraction for memories and queries: the built-in tool alias table, alias
normalization, and the rules that turn backticked code, file paths, tool names in prose and
``entity:`` tags into `EntityMention`s. No model, network or I/O is involved."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

ENTITY_KINDS: tuple[str, ...] = ("person", "project", "tool", "preference", "other")


@dataclass(frozen=True)
class EntityMention:
    kind: str
    name: str
    key: str
    aliases: tuple[str, ...]


# "Display|extra, aliases" entries. Deliberately absent: "py" (launcher, file suffix) and "ts"
# (the usual name of a timestamp column): entity_alias.alias is a primary key, so a stored "ts"
# would drag every memory about a `ts` column onto TypeScript.
_TOOL_TABLE = """
ripgrep|rg; Git; grep; sed; awk; Docker; Docker Compose|docker-compose; Kubernetes|k8s
kubectl; Helm; Terraform|tf; npm|npx; pnpm; Yarn; Node.js|node, nodejs; Deno; Python|python3
pip|pip3; pipx; uv; Poetry; conda; pytest; tox; Ruff; mypy; Black; flake8; isort; ESLint
Prettier; Jest; Vitest; make|gnu make; CMake; Cargo; rustc; rustup; Rust; Go|golang; GCC
Clang; SQLite|sqlite3; PostgreSQL|postgres, psql, pg; MySQL; Redis; nginx; Bash; zsh; tmux
Vim; Neovim|nvim; Emacs; Visual Studio Code|vscode; jq; curl; wget; ssh; GitHub
GitHub CLI|gh; GitHub Actions; AWS CLI|awscli, aws-cli; gcloud; webpack; Vite
React|reactjs, react.js; React Native; Vue|vue.js, vuejs; Next.js|nextjs; Django; Flask
FastAPI; Pydantic; SQLAlchemy; NumPy; pandas; ONNX Runtime|onnxruntime; pre-commit
Hypothesis; APSW; Click; JavaScript|js; TypeScript; Homebrew|brew; apt|apt-get
"""


@dataclass(frozen=True)
class _Cue:
    """Context that must accompany an ambiguous (English-word or very short) tool name."""

    cap: bool  # a capitalised mid-sentence form ("written in Go") counts
    ver: bool  # a following dotted version ("go 1.22") counts
    arg: bool  # a following path/file argument ("black src/", "vim ~/.vimrc") counts
    english: bool  # an ordinary English word: never a standalone query token
    strong: frozenset[str]  # next words that never follow the English word ("pip install")
    weak: frozenset[str]  # next words English also allows ("go test it"): need more evidence
    before: frozenset[str]  # tool-specific previous words ("in vim", "import click")


# Precision-first: these names are tools only when backticked or when the context says so (see
# _cue_ok), so "let's go home", "make sure", "click the button", "react to failures" and "the
# black box" yield nothing. Names absent here (rg, tf, gh, pg, k8s, git, ...) match as whole
# words anywhere, except that a short one before a number is skipped ("pg 12" is a page).
# Format: "alias = flags | strong next words | weak next words | tool-specific previous words".
_CUE_TABLE = """
go = cap ver en | mod vet fmt generate env modules toolchain \
    | test build run get install version work clean list doc tool
make = en | target targets lint typecheck fmt ci deps distclean | test tests build install \
    clean all check format dev release docs help run setup bootstrap coverage bench serve start
pip = | install uninstall freeze wheel download show list check cache config compile
uv = | run sync pip add lock venv tool tools build publish remove init python export tree cache \
    self lockfile workspace
black = cap arg en | formatter formatting reformatted reformats config | | import
click = cap en | library framework decorator decorators | | import
react = cap ver en | component components hook hooks app apps router query context props jsx \
    element elements devtools
node = arg en | repl runtime
vim = cap arg | keybindings bindings mode plugin plugins config motions macros | | in open opened
helm = cap en | install upgrade chart charts template templates repo rollback uninstall lint \
    values release releases dependency package
hypothesis = cap en | strategies strategy library profile profiles | | import
poetry = cap en | install add lock run shell build publish update export env lockfile
cargo = cap en | build test run clippy fmt check add install publish update doc bench tree new \
    init workspace workspaces features
flask = cap en | app apps route routes blueprint blueprints run server application | | import
prettier = cap en | config plugin plugins formatting formatter
rust = cap ver en | toolchain compiler crate crates edition code project projects
jest = cap en | config snapshot snapshots mock mocks matchers
yarn = cap en | install add run build test dlx workspace workspaces berry lockfile
brew = en | install upgrade services tap bundle update uninstall list doctor cask
apt = en | install update upgrade remove purge search list
"""


def _table(text: str) -> dict[str, list[frozenset[str]]]:
    """Parse "name = words | words | ..." lines (backslash-newline continues a line)."""
    rows = (line.partition("=") for line in text.strip().splitlines())
    return {
        k.strip(): [frozenset(f.split()) for f in v.split("|")] + [frozenset()] * 3
        for k, _, v in rows
    }


_CUES = {
    alias: _Cue("cap" in f, "ver" in f, "arg" in f, "en" in f, strong, weak, before)
    for alias, (f, strong, weak, before, *_) in _table(_CUE_TABLE).items()
}
# run: previous words that make any ambiguous name a command ("run black", "via make").
# veto: before a weak follower these make the pair read as English ("we should go test it").
# clause: after a weak follower these (or a clause end / an argument) make "make test" a command.
_W = {
    name: sets[0]
    for name, sets in _table("""
run = run ran runs running rerun invoke invokes invoked invoking via execute executes executed \
    executing install installs installed installing
veto = to let's lets i we you they he she it will would should could can might must may gonna \
    wanna please not don't dont didn't then and i'll we'll you'll
clause = before after first again fails failed passes passed succeeds succeeded locally target \
    targets command output is was now instead still runs works to
stop = a an the and or but if then of to in on at by for with without from into over about as \
    is are was were be been do does did have has had i me my we our you your he she it its they \
    them their this that these those what which who when where why how can could should would \
    will may might must not no yes so than too very just also only any all some each every there \
    here up out again more most other such same both use using used get want need like what's \
    don't doesn't isn't can't won't i'm it's let's that's
dirs = src lib libs tests specs docs scripts bin cmd pkg internal apps packages crates vendor \
    dist etc usr var opt tmp node_modules site-packages fixtures migrations benchmarks examples \
    utils assets templates
root = etc tmp usr var opt home dev proc bin sbin lib mnt srv root sys
files = makefile dockerfile containerfile justfile procfile gemfile rakefile vagrantfile \
    jenkinsfile go.mod go.sum .gitignore .gitattributes .gitmodules .env .envrc .bashrc .zshrc \
    .profile .bash_profile .vimrc .editorconfig .npmrc .nvmrc .python-version .tool-versions \
    .dockerignore .prettierrc .eslintrc .pylintrc .flake8 .coveragerc
exts = py pyi ipynb ts tsx js jsx mjs cjs rs go toml yaml yml json jsonl md rst txt sh bash zsh \
    sql lock cfg ini env c h cpp hpp java kt rb php cs swift html css scss xml csv proto tf
""").items()
}
_LEAD = "\"'`“”‘’«"
_TRAIL = "\"'`“”‘’».,:;!?"
_PAIRS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _PAIRS.items()}
_BACKTICK_RE = re.compile(r"`([^`\n]*)`")
_WIN_RE = re.compile(r"(?:[A-Za-z]:[\\/]|\\\\|\.{1,2}\\|~\\)\S*[A-Za-z]")
_EMAIL_RE = re.compile(r"\w@[\w-]+\.")
_HOST_RE = re.compile(
    r"[(<\"']*(?:www\.|[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai)(?:[/:]|$))", re.I
)
_QUERY_WORD_RE = re.compile(r"[^\s,;()\[\]{}<>\"`|!?]+")


def _normalize_once(text: str) -> str:
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    s = " ".join(s.split())
    while s:
        a, z = s[0], s[-1]
        # Brackets go only when unbalanced, so `foo()` and `a[0]` keep their shape.
        if a in _LEAD or (a in _PAIRS and s.count(a) > s.count(_PAIRS[a])):
            s = s[1:].lstrip()
        elif z in _TRAIL or (z in _CLOSERS and s.count(z) > s.count(_CLOSERS[z])):
            s = s[:-1].rstrip()
        else:
            break
    return s


# Pure functions of one string, called for the same tool names, paths and code spans add after
# add: memoised (~10 us of an add's entity extraction).
@functools.lru_cache(maxsize=8192)
def normalize_alias(text: str) -> str:
    """Casefolded, NFKC, whitespace-collapsed form with wrapping quotes/punctuation removed."""
    prev, s = None, text
    for _ in range(5):  # NFKC/casefold can expose new strippable edges; iterate to a fixed point
        if s == prev:
            break
        prev, s = s, _normalize_once(s)
    return s


def _mention(kind: str, name: str, extra: Sequence[str] = ()) -> EntityMention | None:
    key = normalize_alias(name)
    if not key:
        return None
    aliases = {key} | {a for a in map(normalize_alias, extra) if a}
    return EntityMention(kind, name, key, tuple(sorted(aliases)))


BUILTIN_ALIASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    normalize_alias(d): ("tool", d.strip(), tuple(a.strip() for a in ex.split(",") if a.strip()))
    for d, _, ex in (e.partition("|") for e in _TOOL_TABLE.replace("\n", ";").split(";"))
    if d.strip()
}
_BUILTIN = {
    k: EntityMention(kind, d, k, tuple(sorted({k, *map(normalize_alias, ex)})))
    for k, (kind, d, ex) in BUILTIN_ALIASES.items()
}
_ALIAS_TO_KEY = {a: k for k, m in _BUILTIN.items() for a in m.aliases}
_ENGLISH = frozenset(a for a, c in _CUES.items() if c.english)
# Longest alias first so "github cli" wins over "github"; neighbours like '.', '/', '-' are part
# of the word, so "git" never fires inside "GitHub", "node_modules", ".git" or "pre-commit".


def _alias_alternation(aliases: list[str]) -> str:
    """`a1|a2|...` in the given order, factored by first character: `d(?:ocker|...)|g(?:it|...)`.
    The regex engine tries a branch's alternatives one by one, so at each word start the flat
    form tried all ~110 aliases; factored, it tries one letter per group and then only that
    letter's aliases (41 -> 12 us per add). The first characters are ASCII letters, each
    matching a disjoint set of characters under IGNORECASE, and every group keeps its aliases'
    relative order, so the same alias wins at every position."""
    groups: dict[str, list[str]] = {}
    for a in aliases:
        assert a[:1].isascii() and a[:1].isalpha()
        groups.setdefault(a[0], []).append(r"\s+".join(map(re.escape, a[1:].split(" "))))
    return "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in groups.items())


_PROSE_RE = re.compile(
    r"(?<![\w./\\@$-])(?:"
    + _alias_alternation(sorted(_ALIAS_TO_KEY, key=lambda a: (-len(a), a)))
    + r")(?![\w/\\@]|[.-]\w)",
    re.IGNORECASE,
)


def _clean(tok: str) -> str:
    return tok.replace("’", "'").strip(".,;:!?()[]{}\"'`*").casefold()


def _is_arg(tok: str) -> bool:
    # Paths and code spans were masked to NUL before prose matching.
    return "\x00" in tok or tok in (".", "..") or tok.startswith(("./", "../", "~/"))


def _starts_sentence(before: str) -> bool:
    head = before.rstrip(" \t\"'(“‘*_")
    return not head or head[-1] in ".!?:;\n•*#>|-"


def _cue_ok(cue: _Cue, text: str, start: int, end: int) -> bool:
    word, before, after = text[start:end], text[max(0, start - 80) : start], text[end : end + 120]
    prev_raw = before.split()[-1] if before[-1:].isspace() and before.split() else ""
    prev_start = _starts_sentence(before[: len(before.rstrip()) - len(prev_raw)])
    prev = "" if prev_raw[-1:] in ",.;:!?)" else _clean(prev_raw)
    nxt = after.split()[:2] if after[:1].isspace() else []
    n0 = _clean(nxt[0]) if nxt else ""
    if cue.cap and word[0].isupper() and word[1:].islower() and not _starts_sentence(before):
        # "then Click Save", "Let's Go Home": a capitalised neighbour means a title or UI label.
        if not ((prev_raw[:1].isupper() and not prev_start) or (nxt and nxt[0][:1].isupper())):
            return True
    if prev in _W["run"] or prev in cue.before or (prev == "from" and n0 == "import"):
        return True
    if not nxt:
        return False
    if re.match(r"--?[A-Za-z]", nxt[0]) or n0 in cue.strong:
        return True
    if (cue.ver and re.match(r"v?\d+\.\d+", n0)) or (cue.arg and _is_arg(nxt[0])):
        return True
    if n0 in cue.weak and prev not in _W["veto"]:
        ends = nxt[0][-1] in ",.;:!?)" or len(nxt) == 1
        return ends or _is_arg(nxt[1]) or _clean(nxt[1]) in _W["clause"]
    return False


def _other(name: str) -> EntityMention | None:
    return _mention("other", " ".join(name.split()))


def _from_code(span: str) -> list[EntityMention]:
    name = span.strip()
    key = normalize_alias(name)
    if len(name) > 80 or len(key) < 2 or not any(c.isalpha() for c in key):
        return []
    if key in _ALIAS_TO_KEY:
        return [_BUILTIN[_ALIAS_TO_KEY[key]]]
    found = [m for m in (_other(name),) if m]
    words = key.split()
    for n in (2, 1):  # `docker compose up` -> Docker Compose; `git rebase -i` -> Git
        head = " ".join(words[:n])
        if n < len(words) and head in _ALIAS_TO_KEY:
            found.append(_BUILTIN[_ALIAS_TO_KEY[head]])
            break
    return found


@functools.lru_cache(maxsize=8192)
def _path_name(tok: str) -> str | None:
    name = tok.strip("([{<\"'“”‘’*").rstrip(".,;:!?)]}>\"'”’*")
    # Most words are plain prose: skip the regex work unless the word could be a path.
    if _SPECIAL_CHAR.search(name) is None and name.casefold() not in _W["files"]:
        return None
    name = re.sub(r"(?::\d+)+$|#L\d+(?:-L?\d+)?$", "", name).rstrip(".,;:")  # store.py:42
    if not any(c.isalpha() for c in name) or normalize_alias(name) in _ALIAS_TO_KEY:
        return None  # "Node.js" is a tool, "1/2" and "2024/01/05" are numbers
    if _WIN_RE.match(name):
        return name
    if "/" in name:
        if not re.fullmatch(r"[\w.~/@+*%$-]+", name):
            return None
        segs = [s for s in name.split("/") if s]
        if name.startswith(("./", "../", "~/")):
            return name if segs else None
        if name.startswith("/"):  # "/clear" is a slash command, "/etc" and "/etc/hosts" are paths
            return name if len(segs) > 1 or (segs and segs[0].casefold() in _W["root"]) else None
        if name.endswith("/"):  # "tests/", "deploy/k8s/"; but not "w/" or "and/"
            return (
                name if all(len(s) > 1 and s.casefold() not in _W["stop"] for s in segs) else None
            )
        # Two plain words ("read/write", "and/or", "TCP/IP") are prose unless a segment is a
        # file name, carries '_' or a dot, or is a conventional directory name.
        if any("_" in s or re.search(r"\.[^\W\d_]", s) or s.casefold() in _W["dirs"] for s in segs):
            return name
        return None
    if name.casefold() in _W["files"]:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and ext.casefold() in _W["exts"] and re.fullmatch(r"[\w.+-]+", stem):
        return name if any(c.isalpha() for c in stem) else None
    return None


def _from_tag(tag: str) -> EntityMention | None:
    text = tag.strip()
    if text[:7].casefold() != "entity:":
        return None
    rest, kind = text[7:].strip(), None
    head, sep, tail = rest.partition(":")
    if sep and head.strip().casefold() in ENTITY_KINDS:
        kind, rest = head.strip().casefold(), tail.strip()
    key = normalize_alias(rest)
    if key in _ALIAS_TO_KEY and kind in (None, "tool"):
        return _BUILTIN[_ALIAS_TO_KEY[key]]
    return _mention(kind or "other", " ".join(rest.split()))


_SPECIAL_CHAR = re.compile(r"[./\\@:]")
# The words extract_entities must look at in its path pass: those holding one of . / \\ @ : (URL,
# host, e-mail, path), and those that may be a bare file name (Makefile). Every bare file name
# contains "file", and for ASCII text casefold() is lower(), so a word that is ASCII, holds no
# special character and no "file" in any case can be no path: one regex finds the rest without a
# Python step per word (~45 of an add's ~100 us in entity extraction). Each match is a whole
# whitespace-delimited word, the same span `\S+` gives.
_PATH_WORD_RE = re.compile(r"(?<!\S)\S*?(?:[./\\@:]|[Ff][Ii][Ll][Ee]|[^\s\x00-\x7f])\S*")
assert all(_SPECIAL_CHAR.search(f) or "file" in f for f in _W["files"])


def extract_entities(content: str, tags: Sequence[str] = ()) -> list[EntityMention]:
    """Entities in content (by first occurrence), then from ``entity:`` tags; one per key."""
    found: list[tuple[int, int, EntityMention]] = []
    chars = list(content)

    def mask(start: int, end: int) -> None:
        chars[start:end] = "\x00" * (end - start)

    for m in _BACKTICK_RE.finditer(content):
        mask(m.start(), m.end())
        found.extend((m.start(), i, men) for i, men in enumerate(_from_code(m.group(1))))
    for m in _PATH_WORD_RE.finditer("".join(chars)):
        tok = m.group()
        if "\x00" in tok:
            continue
        # A word with none of . / \ @ : can only be a bare file name (Makefile): skip the
        # URL/host/e-mail/path regexes for the ~95% of words that are plain prose.
        if _SPECIAL_CHAR.search(tok) is None and _path_name(tok) is None:
            continue
        if "://" in tok or _HOST_RE.match(tok) or _EMAIL_RE.search(tok):
            mask(m.start(), m.end())
        elif (name := _path_name(tok)) and (men := _other(name)):
            mask(m.start(), m.end())
            found.append((m.start(), 0, men))
    masked = "".join(chars)
    for m in _PROSE_RE.finditer(masked):
        alias = normalize_alias(m.group())
        if alias not in _ALIAS_TO_KEY:
            # IGNORECASE lets "ı" (dotless i) or "ſ" match "i"/"s", but casefolding keeps them:
            # "gıt" is not git, and must not crash the write.
            continue
        cue = _CUES.get(alias)
        if cue and not _cue_ok(cue, masked, m.start(), m.end()):
            continue
        if len(alias) <= 2 and re.match(r"\.?\s*\d", masked[m.end() : m.end() + 4]):
            continue
        found.append((m.start(), 0, _BUILTIN[_ALIAS_TO_KEY[alias]]))
    found.sort(key=lambda item: (item[0], item[1]))
    mentions = [men for _, _, men in found] + [t for t in map(_from_tag, tags) if t]
    unique: dict[str, EntityMention] = {}
    for men in mentions:
        unique.setdefault(men.key, men)
    return list(unique.values())


def query_aliases(text: str) -> list[str]:
    """Normalized aliases to look up for a query: extracted mentions, words and word pairs."""
    out: dict[str, None] = {}
    for men in extract_entities(text):
        out.update(dict.fromkeys(men.aliases))
    words: list[str | None] = []
    for raw in _QUERY_WORD_RE.findall(text.replace("’", "'")):
        tok = normalize_alias(raw)
        ok = len(tok) >= 2 and tok not in _W["stop"] and any(c.isalnum() for c in tok)
        words.append(tok if ok else None)
    # Common English words that double as tool names only count when the extractor saw a cue.
    out.update(dict.fromkeys(w for w in words if w and w not in _ENGLISH))
    out.update(dict.fromkeys(f"{a} {b}" for a, b in zip(words, words[1:], strict=False) if a and b))
    return list(out)
