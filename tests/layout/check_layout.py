"""check_layout.py ROOT - the architecture's rules, checked on the source.

1. Dependencies run one way.  Each folder may include the headers of the
   folders listed for it below and its own, nothing else: the runtime uses
   the compiler's IR and code generation, and nothing in compiler/ includes
   a runtime header.  (compiler/netc.c, the CLI, is the top of the compiler
   and may use code generation.)
2. No import cycle: no two source files call each other's functions,
   directly or around a longer loop (the file-level call graph, from each
   non-static function's definition to its calls in other files, is
   acyclic).  Internal headers shared by one library's files are fine; a
   file that calls back into the file that calls it is not.
3. Every NETC_* switch is read in one file: getenv appears in compiler/opts.c
   and otherwise only for the standard variables listed below.
4. No copied cache code: only compiler/codegen/cg_cache.c names a .cubin
   file or hashes a cubin's key.
Prints each violation with its file and line; exits 1 when there is any.
"""
import collections
import os
import re
import sys

ALLOWED = {
    "compiler": ["compiler"],
    "compiler/codegen": ["compiler"],
    "runtime/base": [],
    "runtime/ref": ["runtime/base"],
    "runtime/data": ["runtime/base"],
    "runtime/dist": ["runtime/base"],
    "runtime/cpu": ["runtime/ref", "runtime/base", "compiler"],
    "runtime/train": ["runtime/cpu", "runtime/ref", "runtime/base", "compiler"],
    "runtime/io": ["runtime/cpu", "runtime/ref", "runtime/base", "compiler", "compiler/codegen"],
    "runtime/gpu": ["runtime/ref", "runtime/base", "compiler", "compiler/codegen"],
    "runtime/api": ["runtime/train", "runtime/gpu", "runtime/cpu", "runtime/io", "runtime/data", "runtime/dist", "runtime/ref",
                    "runtime/base", "compiler", "compiler/codegen"],
    "runtime/cli": ["runtime/api", "runtime/io", "runtime/base", "compiler"],
}
TOP = {"compiler/netc.c": ["compiler/codegen"]}  # executables above their folder's library
# the system's variables, and the launcher's (torchrun's) for a data-parallel run's ranks (runtime/dist)
# the usual ones, and a data-parallel launcher's (torchrun's, and netrun --gpus's NETRUN_LAUNCH to its ranks)
STANDARD_ENV = {"XDG_CACHE_HOME", "HOME", "TMPDIR", "CC", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                "LOCAL_RANK", "NETRUN_LAUNCH"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DEFINITION = re.compile(r"^(?!static)[A-Za-z_][\w \*]*?\b([a-z_][a-z0-9_]*)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")
COMMENTS = re.compile(r"/\*.*?\*/", re.S)
STRINGS = re.compile(r'"(\\.|[^"\\])*"')


def sources(root):
    for folder in ALLOWED:
        d = os.path.join(root, folder)
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h", ".c.in")):
                yield folder, f, os.path.join(d, f)


def main():
    root = sys.argv[1]
    where = {f: folder for folder, f, _ in sources(root) if f.endswith(".h")}
    bad = []
    edges = collections.defaultdict(set)
    for folder, f, path in sources(root):
        text = open(path, encoding="utf-8").read()
        rel = folder + "/" + f
        ok = set(ALLOWED[folder]) | {folder} | set(TOP.get(rel, []))
        for m in INCLUDE.finditer(text):
            h = m.group(1)
            if h not in where:
                continue  # generated or third-party
            line = text.count("\n", 0, m.start()) + 1
            if where[h] not in ok:
                bad.append(f"{rel}:{line}: includes {where[h]}/{h}: {folder} may not depend on {where[h]}")
        for m in re.finditer(r"\bgetenv\s*\(\s*([^)]*)\)", text):
            arg, line = m.group(1).strip(), text.count("\n", 0, m.start()) + 1
            if rel == "compiler/opts.c":
                continue
            name = arg.strip('"')
            if not (arg.startswith('"') and name in STANDARD_ENV):
                bad.append(f"{rel}:{line}: getenv({arg}): switches are read in compiler/opts.c only")
        if rel != "compiler/codegen/cg_cache.c":
            for m in re.finditer(r'\.cubin"|fnv1a\s*\(\s*0x', text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: cache code outside compiler/codegen/cg_cache.c")
    # the file-level call graph: where each exported function is defined, and
    # which other files call it
    defined = {}
    for folder, f, path in sources(root):
        if f.endswith(".c"):
            for m in DEFINITION.finditer(open(path, encoding="utf-8").read()):
                defined.setdefault(m.group(1), folder + "/" + f)
    for folder, f, path in sources(root):
        if not f.endswith(".c"):
            continue
        rel = folder + "/" + f
        code = STRINGS.sub('""', COMMENTS.sub("", open(path, encoding="utf-8").read()))
        for m in CALL.finditer(code):
            callee = defined.get(m.group(1))
            if callee and callee != rel:
                edges[rel].add(callee)
    # cycles (depth-first search)
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                bad.append("call cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    for b in bad:
        print(b)
    print(f"check_layout: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
