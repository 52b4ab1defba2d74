"""Turn the generated function's local 0-d arrays into plain scalar variables.

Op implementations see every 0-d value as a 0-d array (``v = empty((), np.float64)``,
written by ``v[()] = ...``, read by ``v[()]``), which keeps them simple. In the body of
a generated function most such arrays never leave it: each is one heap allocation, and
Numba writes far more IR for a 0-d array's store and load than for a float. This pass
rewrites each array that is only ever stored and loaded through ``[()]`` (directly or
through in-place aliases ``w = v``) into a local scalar: ``v = np.float64(...)`` and
``v``. An array passed to a function, returned, sliced or written in place by a loop
keeps its storage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DECL = re.compile(rf"^(?P<indent>\s*)(?P<name>{_NAME}) = empty\(\(\), (?P<dtype>np\.\w+)\)$")
_ALIAS = re.compile(rf"^(?P<indent>\s*)(?P<name>{_NAME}) = (?P<src>{_NAME})$")
_STORE = re.compile(rf"^(?P<indent>\s*)(?P<name>{_NAME})\[\(\)\] = (?P<expr>.*)$")
_WORD = re.compile(_NAME)


def promote_scalars(lines: Sequence[str]) -> list[str]:
    """Return ``lines`` (one function body) with its purely local 0-d arrays as scalars."""
    decls: dict[str, tuple[int, str, str]] = {}  # name -> (line, indent, dtype)
    parent: dict[str, str] = {}  # alias -> the array it names
    for k, line in enumerate(lines):
        if m := _DECL.match(line):
            decls[m["name"]] = (k, m["indent"], m["dtype"])
        elif (m := _ALIAS.match(line)) and (m["src"] in decls or m["src"] in parent):
            parent[m["name"]] = m["src"]

    def root(name: str) -> str:
        while name in parent:
            name = parent[name]
        return name

    groups = {name: root(name) for name in (*decls, *parent)}
    bad: set[str] = set()
    first_store: dict[str, int] = {}
    for k, line in enumerate(lines):
        if line.lstrip().startswith("#") or _DECL.match(line):
            continue
        if (alias := _ALIAS.match(line)) and alias["name"] in parent:
            continue
        store = _STORE.match(line)
        target = None
        if store and store["name"] in groups:
            target = len(store["indent"])
            first_store.setdefault(groups[store["name"]], k)
        for m in _WORD.finditer(line):
            group = groups.get(m.group())
            if group is None or m.start() == target:
                continue
            zero_d = (
                line[m.end() : m.end() + 4] == "[()]" and line[m.start() - 1 : m.start()] != "."
            )
            if not zero_d or first_store.get(group, k) == k:
                bad.add(group)  # used as an array, or read before its first store
    for name, (k, indent, _) in decls.items():
        j = first_store.get(name)
        if j is None or not _same_block(lines, k, j, indent):
            bad.add(name)
    keep = {name for name, r in groups.items() if r in bad}
    out: list[str] = []
    for line in lines:
        m = _DECL.match(line) or _ALIAS.match(line)
        if m and m["name"] in groups and m["name"] not in keep:
            continue
        store = _STORE.match(line)
        if store and store["name"] in groups and store["name"] not in keep:
            r = groups[store["name"]]
            dtype = decls[r][2]
            line = f"{store['indent']}{r} = {dtype}({_rename(store['expr'], groups, keep)})"
        else:
            line = _rename(line, groups, keep)
        out.append(line)
    return out


def _rename(text: str, groups: dict[str, str], keep: set[str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        return groups[name] if name in groups and name not in keep else m.group(0)

    return re.sub(rf"\b({_NAME})\[\(\)\]", sub, text)


def _same_block(lines: Sequence[str], decl: int, store: int, indent: str) -> bool:
    """Whether ``lines[store]`` is at ``indent`` and no line between leaves that block."""
    if not lines[store].startswith(indent) or lines[store][len(indent)].isspace():
        return False
    for line in lines[decl + 1 : store]:
        if line.strip() and not line.startswith(indent):
            return False
    return True


_COPY = re.compile(
    rf"^(?P<name>{_NAME}) = (?P<src>{_NAME}|-?\d+(?:\.\d*)?(?:e[+-]?\d+)?|-?np\.inf|np\.nan)$"
)
_BINDING = re.compile(
    rf"^\s*(?:for )?\(?(?P<names>{_NAME}(?:, {_NAME})*),? ?\)?"
    r"(?: =| in| [-+*/%&|^@]=| //=| \*\*=| >>=| <<=) "
)
_STRING = re.compile(r"('[^']*'|\"[^\"]*\")")


def propagate_copies(lines: Sequence[str]) -> list[str]:
    """Return ``lines`` without the top-level copies ``a = b`` and ``a = <number>``.

    The uses of ``a`` after the copy read ``b`` (or the number, parenthesized) instead.
    Only a name bound once in the body is replaced, and only by a name bound at most
    once, before the copy (or never: a parameter, a constant), so every use sees the
    value the copy had. The generated code writes one such copy per input of every
    scalar step; Numba types and lowers each of them.
    """
    bindings: dict[str, list[int]] = {}
    for k, line in enumerate(lines):
        if m := _BINDING.match(line):
            for name in m["names"].split(", "):
                bindings.setdefault(name, []).append(k)
    copies: dict[int, tuple[str, str]] = {}
    for k, line in enumerate(lines):
        m = _COPY.match(line)
        if m is None or len(bindings.get(m["name"], ())) != 1:
            continue
        src = m["src"]
        if src[0].isalpha() or src[0] == "_":
            where = bindings.get(src, [])
            if len(where) > 1 or (where and where[0] > k):
                continue
        elif src.startswith("-"):
            src = f"({src})"
        copies[k] = (m["name"], src)
    if not copies:
        return list(lines)
    subst: dict[str, str] = {}
    word = re.compile(rf"(?<![.\w])({_NAME})\b")

    def rename(text: str) -> str:
        parts = _STRING.split(text)  # leave string literals (messages, labels) alone
        parts[::2] = [word.sub(lambda m: subst.get(m.group(1), m.group(1)), p) for p in parts[::2]]
        return "".join(parts)

    out = []
    for k, line in enumerate(lines):
        if k in copies:
            name, src = copies[k]
            subst[name] = subst.get(src, src)
            continue
        out.append(rename(line) if subst else line)
    return out
