"""api_reference.py OUT_DIR: the Python package's API reference, with pdoc.

Writes OUT_DIR/index.html and one page per public module (frameprep and
what its __init__ and the README name: client, ring, cuda, errors,
protocol; not _core or _native, whose public names frameprep re-exports,
nor the tools __main__ and bench), from the docstrings, in
reStructuredText (pdoc turns :class:`X` into a link where X is in the
reference).

Fails (exit 1), listing each, on:
  - any warning raised while the modules are read or rendered (pdoc reports
    what it cannot import, parse or resolve as warnings);
  - a public name without a docstring: a module's, a class's, a function's,
    a method's, a property's, an attribute's (a docstring under it, or one
    the same name has in a base class of the package). A module-level
    name that a module imports from another (frameprep's from _core and
    errors) takes the docstring it has where it is assigned, and the page
    shows it.
Names inherited from outside the package (numpy's ndarray, Exception) are
documented there and not checked. Sphinx's :class:`~a.b.C` (show C) is
read as :class:`a.b.C`: pdoc would keep the tilde before the link.
"""

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.doc
import pdoc.doc_ast
import pdoc.render

MODULES = ["frameprep", "frameprep.client", "frameprep.ring",
           "frameprep.cuda", "frameprep.errors", "frameprep.protocol"]
PACKAGE = "frameprep"
TILDE = re.compile(r"(:[a-z]+:`)~")


def imported_docstring(module: pdoc.doc.Module, name: str) -> str:
    """The docstring of NAME where MODULE imports it from (from .X import
    NAME)."""
    tree = ast.parse(Path(module.obj.__file__).read_text())
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if not any(a.name == name and a.asname is None for a in node.names):
            continue
        source = importlib.import_module(
            "." * node.level + (node.module or ""),
            module.modulename if module.is_package
            else module.modulename.rpartition(".")[0])
        return pdoc.doc_ast.walk_tree(source).var_docstrings.get(name, "")
    return ""


def undocumented(namespace: pdoc.doc.Namespace,
                 missing: dict[tuple[str, str], str]) -> None:
    """Adds NAMESPACE's public names without a docstring to MISSING (and
    drops the package's docstrings' tildes, see above).

    MISSING maps where a name is defined to where it is shown first: a
    definition shown on several pages is counted once.
    """
    for member in namespace.members.values():
        if member.taken_from[0].startswith(PACKAGE):
            member.docstring = TILDE.sub(r"\1", member.docstring)
        if member.name.startswith("_"):
            continue
        if isinstance(namespace, pdoc.doc.Module):
            # A module's members are its own or its __all__'s (pdoc's
            # rule); a variable's taken_from is its value's module
            # (typing, for a Literal alias), so it is not asked.
            if (not member.docstring.strip()
                    and isinstance(member, pdoc.doc.Variable)):
                member.docstring = imported_docstring(namespace, member.name)
        elif not member.taken_from[0].startswith(PACKAGE):
            continue  # inherited from numpy, builtins: documented there
        if not member.docstring.strip():
            where = member.taken_from
            if isinstance(namespace, pdoc.doc.Module):
                where = (member.modulename, member.name)
            missing.setdefault(where, f"{member.fullname} "
                               f"({member.kind}, defined in "
                               f"{'.'.join(member.taken_from)})")
        if isinstance(member, pdoc.doc.Class):
            undocumented(member, missing)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    problems: list[str] = []
    missing: dict[tuple[str, str], str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.render.configure(docformat="restructuredtext",
                              footer_text=f"{PACKAGE} (src/python)")
        modules = {name: pdoc.doc.Module.from_name(name) for name in MODULES}
        for module in modules.values():
            module.docstring = TILDE.sub(r"\1", module.docstring)
            if not module.docstring.strip():
                problems.append(f"{module.fullname} (module): no docstring")
            undocumented(module, missing)
        # pdoc.pdoc()'s own steps, on the modules checked above (their
        # re-exported docstrings filled in).
        pages = {name: pdoc.render.html_module(module, modules)
                 for name, module in modules.items()}
        index = pdoc.render.html_index(modules)
        search = pdoc.render.search_index(modules)
    problems += [f"{name}: no docstring" for name in missing.values()]
    for w in caught:
        problems.append(f"warning: {w.filename}:{w.lineno}: "
                        f"{w.category.__name__}: {w.message}")
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"api_reference: {len(problems)} problem(s); nothing written",
              file=sys.stderr)
        return 1
    for name, html in pages.items():
        page = out / f"{name.replace('.', '/')}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(html)
    if index:  # pdoc makes none for a single module
        (out / "index.html").write_text(index)
    if search:
        (out / "search.js").write_text(search)
    print(f"ok: {len(pages)} modules ({', '.join(pages)}) in "
          f"{out.resolve()}, pdoc {pdoc.__version__}, no warning, "
          f"every public name documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
