#!/usr/bin/env python3
"""Lists rsmpi's public API items that myriad lacks (issue 11).

Usage: .ci/api_diff.py [--rsmpi DIR] [--all]

Without --rsmpi, finds the `mpi` 0.8.2 crate's source in ~/.cargo/registry/src,
fetching it first into a scratch crate (`cargo fetch`; it needs no C MPI, nothing is
built). Both crates' sources are read as text: comments and strings stripped, braces
tracked, and every public item recorded as a key:

  Name                 a top-level `pub` struct, enum, trait, type alias, fn, const, mod,
                       or a name a `pub use` re-exports
  Type::name           a `pub fn` of an inherent `impl Type`, a `fn` of a `pub trait`,
                       or a variant of a `pub enum`

Keys are compared without module paths (rsmpi re-exports most items in several places,
and `tests/ported_example.rs` checks the paths the ported examples use). It prints the
keys rsmpi has and myriad does not, minus those in KNOWN below, whose reasons the
README's "Differences from rsmpi" lists; with --all, also the known ones. It exits 1
when an unexplained difference is left. Feature names are compared too.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MYRIAD_SRC = os.path.join(HERE, "..", "src")

# rsmpi's items that myriad does not have, with why (the README explains each).
KNOWN = {
    # No C MPI under myriad: raw handles and their conversions.
    "AsRaw": "no C handles",
    "AsRawMut": "no C handles",
    "FromRaw": "no C handles",
    "MatchesRaw": "no C handles",
    "raw": "no C handles (module)",
    "as_raw": "no C handles",
    "as_raw_mut": "no C handles",
    "from_raw": "no C handles",
    "into_raw": "no C handles",
    "try_from_raw": "no C handles",
    "SimpleCommunicator::try_from_raw": "no C handles",
    "InterCommunicator::try_from_raw": "no C handles",
    "Request::from_raw": "no C handles",
    "Request::into_raw": "no C handles",
    "DynBuffer::from_raw": "no C handles",
    "DynBufferMut::from_raw": "no C handles",
    "Status::from_raw": "no C handles",
    "Message::into_raw": "no C handles",
    "Message::from_raw": "no C handles",
    "UserDatatype::from_raw": "no C handles",
    "UserOperation::from_raw": "no C handles",
    "SystemGroup::from_raw": "no C handles",
    "UserGroup::from_raw": "no C handles",
    "UncommittedDatatypeRef::from_raw": "no C handles",
    "DatatypeRef::from_raw": "no C handles",
    "Status::raw": "no C handles",
    # rsmpi's private helpers that leak as `pub` in the source but are not reachable.
    "with_uninitialized": "crate-private in rsmpi",
    "with_uninitialized2": "crate-private in rsmpi",
    "CommunicatorHandle": "sealed in rsmpi",
    "AsHandle": "sealed in rsmpi",
    "AsHandle::as_handle": "sealed in rsmpi",
    "sealed": "sealed in rsmpi",
    "CartesianCommunicator::try_from_raw": "no C handles",
    "AsRaw::as_raw": "no C handles",
    "AsRawMut::as_raw_mut": "no C handles",
    "FromRaw::from_raw": "no C handles",
    "CommunicatorHandle::InterComm": "sealed in rsmpi",
    "CommunicatorHandle::Parent": "sealed in rsmpi",
    "CommunicatorHandle::SelfComm": "sealed in rsmpi",
    "CommunicatorHandle::User": "sealed in rsmpi",
    "CommunicatorHandle::World": "sealed in rsmpi",
    "CommunicatorHandle::inter_comm_from_raw": "sealed in rsmpi",
    "CommunicatorHandle::is_inter_comm": "sealed in rsmpi",
    "CommunicatorHandle::parent_comm_from_raw": "sealed in rsmpi",
    "CommunicatorHandle::simple_comm_from_raw": "sealed in rsmpi",
    "CommunicatorHandle::try_from_raw": "sealed in rsmpi",
    # C attribute keyvals and their copy/delete callbacks: myriad keys attributes by type.
    "AttributeKey": "C keyvals (attributes are keyed by type)",
    "AttributeKey::new_unchecked": "C keyvals",
    "CommAttribute::get_key": "C keyvals",
    "CommAttribute::comm_copy_attr_fn": "C keyval callbacks",
    "CommAttribute::comm_delete_attr_fn": "C keyval callbacks",
    # rsmpi's `Topology` enum is `CommunicatorTopology`: `myriad::topology::Topology` is the
    # hardware topology.
    "Topology::Cartesian": "renamed CommunicatorTopology",
    "Topology::DistributedGraph": "renamed CommunicatorTopology",
    "Topology::Graph": "renamed CommunicatorTopology",
    "Topology::Undefined": "renamed CommunicatorTopology",
    # #[doc(hidden)] support of rsmpi's derive (MPI initialisation checks, once_cell).
    "check_derive_equivalence_universe_state": "derive internals",
    "internal": "derive internals",
    "once_cell": "derive internals",
    # The module holding rsmpi's `Equivalence` impls for complex numbers; myriad has the impls
    # (feature `complex`), not the module name.
    "complex_datatype": "impls exist, module name does not",
    # Spawning programs: a thread runtime has no executables to start (`Root::spawn` exists
    # and returns Error::Unsupported; `Communicator::spawn_ranks` spawns closures).
    "Root::spawn_multiple": "no process spawning",
}


def strip(src):
    """Removes comments, string and char literals (keeps lines)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 5]) and not src[i - 1:i].isalnum():
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            out.append('""')
            i = end + 1 + len(m.group(1))
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", src[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


ITEM = re.compile(
    r"\b(pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|const\s+|async\s+|extern\s+\"\"\s+)*"
    r"(fn|struct|enum|trait|type|mod|const|static|use|impl|macro_rules!)\b"
)


def items(root, skip_files=()):
    """Public item keys of the crate whose source is under `root`."""
    keys = set()
    for path in sorted(glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(path, root)
        if any(rel.startswith(s) for s in skip_files):
            continue
        src = strip(open(path, encoding="utf-8").read())
        # Drop #[cfg(test)] modules.
        src = re.sub(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", "mod __test__ {", src)
        parse(src, keys)
        macro_methods(src, keys)
    return keys


def macro_methods(src, keys):
    """`pub fn`s that a `macro_rules!` puts in an `impl $ty`, for each type the
    file invokes the macro with (`common_methods!(DynBuffer);`)."""
    for m in re.finditer(r"macro_rules!\s*([A-Za-z_]\w*)\s*\{", src):
        name = m.group(1)
        body = src[m.end() - 1:block_end(src, m.end() - 1)]
        if not re.search(r"\bimpl\b[^{]*\$", body):
            continue
        fns = re.findall(r"\bpub\s+(?:unsafe\s+)?fn\s+([A-Za-z_]\w*)", body)
        for call in re.finditer(re.escape(name) + r"!\s*[({]([^;]*?)[)}]\s*;", src):
            for ty in re.findall(r"\b([A-Z]\w*)", call.group(1)):
                keys.update(f"{ty}::{f}" for f in fns)


def block_end(src, i):
    """Index after the block whose `{` is at i."""
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(src)


def parse(src, keys, context=None):
    """Records the public items of `src` (a module body, a trait or impl body)."""
    i = 0
    while True:
        m = ITEM.search(src, i)
        if not m:
            return
        vis, kind = m.group(1), m.group(2)
        rest = src[m.end():]
        i = m.end()
        name_m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", rest)
        if kind == "mod":
            if not name_m:
                continue
            name = name_m.group(1)
            brace = re.match(r"\s*\w+\s*\{", rest)
            if name == "__test__" and brace:
                i = block_end(src, m.end() + rest.index("{"))
                continue
            if vis and context is None:
                keys.add(name)
            continue
        if kind == "use":
            end = src.find(";", i)
            if vis and vis.strip() == "pub" and context is None:
                body = src[i:end]
                for name in re.findall(r"(?:\bas\s+)?\b([A-Za-z_]\w*)\s*(?=[,}]|$)", body):
                    if name not in ("self", "super", "crate"):
                        keys.add(name)
                for name in re.findall(r"\bas\s+([A-Za-z_]\w*)", body):
                    keys.add(name)
            i = end + 1
            continue
        if kind == "impl":
            brace = src.find("{", i)
            semi = src.find(";", i)
            if brace < 0 or (0 <= semi < brace):
                continue
            header = src[i:brace]
            end = block_end(src, brace)
            # `impl<..> Trait for Type` or `impl<..> Type`.
            header = re.sub(r"^\s*<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>", "", header)
            header = re.sub(r"\bwhere\b.*", "", header, flags=re.S)
            if re.search(r"\bfor\b", header):
                i = end  # trait impl: its methods are the trait's
                continue
            tm = re.search(r"([A-Za-z_]\w*)\s*(?:<.*)?$", header.strip(), re.S)
            ty = tm.group(1) if tm else "?"
            parse_impl(src[brace + 1:end - 1], keys, ty)
            i = end
            continue
        if kind == "macro_rules!":
            continue
        if not name_m:
            continue
        name = name_m.group(1)
        if kind == "trait":
            brace = src.find("{", i)
            end = block_end(src, brace)
            if vis and vis.strip() == "pub":
                keys.add(name)
                for f in re.findall(r"\bfn\s+([A-Za-z_]\w*)", src[brace:end]):
                    keys.add(f"{name}::{f}")
            i = end
            continue
        if kind == "enum":
            brace = src.find("{", i)
            end = block_end(src, brace)
            if vis and vis.strip() == "pub":
                keys.add(name)
                body = src[brace + 1:end - 1]
                body = re.sub(r"#\[[^\]]*\]", "", body)
                depth, cur = 0, ""
                variants = []
                for ch in body:
                    if ch in "({":
                        depth += 1
                    elif ch in ")}":
                        depth -= 1
                    elif ch == "," and depth == 0:
                        variants.append(cur)
                        cur = ""
                        continue
                    if depth == 0:
                        cur += ch
                variants.append(cur)
                for v in variants:
                    vm = re.match(r"\s*([A-Za-z_]\w*)", v)
                    if vm:
                        keys.add(f"{name}::{vm.group(1)}")
            i = end
            continue
        if kind == "fn" and context is None:
            # Skip the body.
            brace = src.find("{", i)
            semi = src.find(";", i)
            if vis and vis.strip() == "pub":
                keys.add(name)
            if brace >= 0 and (semi < 0 or brace < semi):
                i = block_end(src, brace)
            continue
        if vis and vis.strip() == "pub" and context is None:
            keys.add(name)


def parse_impl(body, keys, ty):
    i = 0
    while True:
        m = re.search(r"\b(pub(?:\([^)]*\))?\s+)?(?:const\s+|unsafe\s+|async\s+)*fn\s+([A-Za-z_]\w*)", body[i:])
        if not m:
            return
        start = i + m.end()
        if m.group(1) and m.group(1).strip() == "pub":
            keys.add(f"{ty}::{m.group(2)}")
        brace = body.find("{", start)
        semi = body.find(";", start)
        if brace < 0:
            return
        if 0 <= semi < brace:
            i = semi + 1
        else:
            i = block_end(body, brace)


def features(cargo_toml):
    text = open(cargo_toml, encoding="utf-8").read()
    m = re.search(r"^\[features\]\s*$(.*?)(^\[|\Z)", text, re.S | re.M)
    if not m:
        return set()
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", m.group(1), re.M))


def find_rsmpi():
    pattern = os.path.expanduser("~/.cargo/registry/src/*/mpi-0.8.2")
    found = glob.glob(pattern)
    if found:
        return found[0]
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["cargo", "new", "--lib", "--quiet", "probe"], cwd=scratch, check=True)
        probe = os.path.join(scratch, "probe")
        with open(os.path.join(probe, "Cargo.toml"), "a") as f:
            f.write('mpi = { version = "=0.8.2", default-features = false }\n')
        subprocess.run(["cargo", "fetch", "--quiet"], cwd=probe, check=True)
    found = glob.glob(pattern)
    if not found:
        sys.exit("could not find mpi-0.8.2 in ~/.cargo/registry/src after cargo fetch")
    return found[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rsmpi", help="the mpi 0.8.2 crate's directory")
    ap.add_argument("--all", action="store_true", help="also list the known differences")
    args = ap.parse_args()
    rsmpi = args.rsmpi or find_rsmpi()
    theirs = items(os.path.join(rsmpi, "src"), skip_files=("ffi",))
    ours = items(MYRIAD_SRC)
    missing = sorted(theirs - ours)
    unexplained = [k for k in missing if k not in KNOWN]
    known = [k for k in missing if k in KNOWN]
    print(f"rsmpi 0.8.2: {len(theirs)} public item keys; myriad: {len(ours)}")
    ours_features = features(os.path.join(HERE, "..", "Cargo.toml"))
    missing_features = sorted(features(os.path.join(rsmpi, "Cargo.toml")) - ours_features)
    for f in missing_features:
        print(f"feature missing: {f}")
    if args.all:
        for k in known:
            print(f"known: {k}  ({KNOWN[k]})")
    for k in unexplained:
        print(f"missing: {k}")
    print(f"{len(unexplained)} unexplained, {len(known)} known (README, 'Differences from rsmpi')")
    sys.exit(1 if unexplained or missing_features else 0)


if __name__ == "__main__":
    main()
