"""Dependencies point one way: spec → layers → layout (→ the generated
layout/wire.py) → capture → engine → analysis → report/CLI, the Wireshark generator beside.  Each
module is imported in a fresh interpreter and the modules it pulled in are read
from ``sys.modules``."""

import ast
import functools
import json
import subprocess
import sys
from collections import deque

import numpy as np
import pytest

from conftest import REPO

LAYER_MODULES = sorted("rtrs_scapy.layers." + path.stem
                       for path in (REPO / "rtrs_scapy" / "layers").glob("*.py"))
ENGINE = ("rtrs_scapy.capture", "rtrs_scapy.engine", "rtrs_scapy.analysis",
          "rtrs_scapy.wireshark", "rtrs_scapy.report", "rtrs_scapy.craft", "rtrs_scapy.cli")

PACKAGES = ("rtrs_scapy", "scapy")


def imported_by(module, statement="import %s", package="rtrs_scapy"):
    """The ``package`` modules (rtrs_scapy or scapy) that importing ``module`` loads in a
    fresh interpreter."""
    assert package in PACKAGES
    return [m for m in _loaded(module, statement) if m.split(".")[0] == package]


@functools.lru_cache(maxsize=None)
def _loaded(module, statement):
    """The modules of PACKAGES that importing ``module`` loads in a fresh interpreter:
    one interpreter for the tests that ask of both packages."""
    code = ("import json, sys; %s; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] in %r)))" % (statement % module, PACKAGES))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    return tuple(json.loads(done.stdout))


def _below(modules, banned):
    return [m for m in modules if any(m == b or m.startswith(b + ".") for b in banned)]


def test_every_layer_module_is_listed():
    assert "rtrs_scapy.layers.ib" in LAYER_MODULES and "rtrs_scapy.layers.rnbd" in LAYER_MODULES


@pytest.mark.parametrize("module", LAYER_MODULES)
def test_layers_import_neither_layout_nor_engine(module):
    """The layers are the bottom."""
    loaded = imported_by(module)
    assert "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ("rtrs_scapy.layout",) + ENGINE) == []


def test_spec_imports_nothing_of_the_package():
    """The shared constants, immediate and bounds are the bottom of everything."""
    for module in ("rtrs_scapy.spec.constants", "rtrs_scapy.spec.imm", "rtrs_scapy.spec.limits"):
        assert _below(imported_by(module), ("rtrs_scapy.layers", "rtrs_scapy.layout") + ENGINE) == []
        assert imported_by(module, package="scapy") == []


def test_star_import_loads_every_layer_and_no_engine():
    loaded = imported_by("rtrs_scapy", "from %s import *")
    assert {"rtrs_scapy.layers.ib", "rtrs_scapy.layers.rnbd"} <= set(loaded)
    assert _below(loaded, ("rtrs_scapy.layout",) + ENGINE) == []


@pytest.mark.parametrize("module", ["rtrs_scapy.analysis", "rtrs_scapy.cli.summary",
                                    "rtrs_scapy.capture", "rtrs_scapy.engine"])
def test_the_capture_analysis_needs_no_scapy(module):
    """Reading a capture goes through the generated wire.py: no layer, no Scapy."""
    assert imported_by(module, package="scapy") == []
    assert _below(imported_by(module), ("rtrs_scapy.layers", "rtrs_scapy.layout.from_layers",
                                        "rtrs_scapy.layout.wiregen", "rtrs_scapy.layout.doc")) == []


def test_layout_imports_the_layers_and_no_engine():
    loaded = imported_by("rtrs_scapy.layout.from_layers")
    assert "rtrs_scapy.layers.cm" in loaded and "rtrs_scapy.layers.ib" in loaded
    assert _below(loaded, ENGINE) == []


#: each sub-package's place: a module imports only from its own place or lower ones
RANKS = {"spec": 0, "layers": 1, "layout": 2, "capture": 3, "engine": 4, "analysis": 5,
         "kernel_log": 5,
         "report": 6, "craft": 6, "wireshark": 6, "tables": 7, "watch": 7, "cli": 8}


def _imported_rooms(path):
    """(line, sub-package) of every rtrs_scapy import of one module, lazy ones included."""
    parts = path.relative_to(REPO / "rtrs_scapy").with_suffix("").parts
    package = ["rtrs_scapy", *parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else [])).split(".")
            if module[0] != "rtrs_scapy":
                continue
            names = module[1:2] or [alias.name for alias in node.names]
            yield from ((node.lineno, name) for name in names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[1]) for alias in node.names
                        if alias.name.startswith("rtrs_scapy."))


def test_every_module_lives_in_a_sub_package():
    """The package root holds only its facade; every module sits in the room of its role."""
    assert sorted(p.name for p in (REPO / "rtrs_scapy").glob("*.py")) == ["__init__.py"]
    rooms = {p.name for p in (REPO / "rtrs_scapy").iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(RANKS)


def test_no_module_imports_upward():
    """Read statically, so that imports inside functions count too."""
    upward = []
    for path in sorted((REPO / "rtrs_scapy").rglob("*.py")):
        parts = path.relative_to(REPO / "rtrs_scapy").parts
        if len(parts) == 1 or parts[-1] == "contrib_rtrs.py":
            continue  # the facade, and Scapy's load_contrib entry that star-imports it
        for line, room in _imported_rooms(path):
            if room in RANKS and RANKS[room] > RANKS[parts[0]]:
                upward.append("%s:%d imports %s" % ("/".join(parts), line, room))
    assert upward == []


# -- the analyzer's parts (docs/design.md#the-analyzers-parts) --------------------------

#: the names an analyzer goes by outside its own module: ``an``, ``analyzer``, and the
#: attribute of that name (``self.an``, ``result.analyzer``)
ANALYZER_NAMES = {"an", "analyzer"}


#: methods that change a list, dict, set or deque in place
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "popleft", "appendleft",
            "extendleft", "remove", "discard", "clear", "update", "setdefault", "add", "sort",
            "reverse", "move_to_end", "difference_update", "intersection_update",
            "symmetric_difference_update", "__setitem__", "__delitem__"}
#: what a part is not: a bare container
CONTAINERS = (dict, list, set, deque, bytearray, np.ndarray)


def _of_an_analyzer(node):
    """Is ``node`` an attribute of an analyzer (``an.x``, ``self.an.x``, ``analyzer.x``)?"""
    if not isinstance(node, ast.Attribute):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id in ANALYZER_NAMES) or \
        (isinstance(owner, ast.Attribute) and owner.attr in ANALYZER_NAMES)


def _analyzer_attributes(tree):
    """(line, name, stored) of every attribute of an analyzer in ``tree``."""
    for node in ast.walk(tree):
        if _of_an_analyzer(node):
            yield node.lineno, node.attr, isinstance(node.ctx, (ast.Store, ast.Del))


def _bound_names(target):
    """The local names an assignment's target binds."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []       # an attribute or an item: no local name


def _chain(node, aliases):
    """The attributes ``node`` names below an analyzer, outermost first (``an.x.y``,
    ``self.an.x.y``: ("x", "y"); a local name in ``aliases`` stands for what it holds),
    or None."""
    names = []
    while isinstance(node, ast.Attribute) and node.attr not in ANALYZER_NAMES:
        names.insert(0, node.attr)
        node = node.value
    if isinstance(node, ast.Attribute) or \
            (isinstance(node, ast.Name) and node.id in ANALYZER_NAMES):
        return tuple(names) or None
    if isinstance(node, ast.Name) and node.id in aliases:
        return aliases[node.id] + tuple(names)
    return None


def _aliases(function):
    """Local names of ``function`` that only ever hold an analyzer's attribute
    (``paths = an.path_list``, ``state = an.failover_state``, ``waiting =
    state.undelivered``): name -> what it holds (as ``_chain`` tells it)."""
    aliases = {}
    for _ in range(3):      # a name may hold what another one holds
        held = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
                targets = [node.target]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                targets = [node.optional_vars]
            else:
                continue
            for target in targets:
                whole = isinstance(node, ast.Assign) and isinstance(target, ast.Name)
                chain = _chain(node.value, aliases) if whole else None
                for name in _bound_names(target):
                    held.setdefault(name, set()).add(chain)
        aliases = {name: chains.pop() for name, chains in held.items()
                   if len(chains) == 1 and None not in chains}
    return aliases


def _changed_in_place(tree):
    """(line, attributes) of every attribute of an analyzer (or of its parts) changed in
    place in ``tree``: an item assigned or deleted (``an.x[k] = v``, ``an.x[k] += 1``,
    ``del an.x[k]``) or a mutating method called (``an.x.append(v)``,
    ``self.an.x.y.pop(k)``), also through a local name that holds it (``paths = an.x``
    … ``paths[k] = v``).  ``attributes``: ("x",), ("x", "y"), …"""
    found = set()
    for scope in [tree] + [node for node in ast.walk(tree)
                           if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        aliases = _aliases(scope) if scope is not tree else {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in MUTATORS:
                target = node.func.value
            else:
                continue
            chain = _chain(target, aliases)
            if chain is not None:
                found.add((node.lineno, chain))
    return sorted(found)


@functools.lru_cache(maxsize=None)
def _scan(path):
    """(``_analyzer_attributes``, ``_changed_in_place``) of one file, parsed and scanned
    once for the tests below that read them (the module runs on one worker:
    conftest.SHARED_WORK)."""
    tree = ast.parse(path.read_text())
    return tuple(_analyzer_attributes(tree)), tuple(_changed_in_place(tree))


def _outside_the_analyzer():
    paths = sorted((REPO / "rtrs_scapy").rglob("*.py")) + sorted((REPO / "tests").glob("*.py"))
    return [p for p in paths if p != REPO / "rtrs_scapy" / "analysis" / "analyzer.py"]


def test_the_scan_sees_an_assignment():
    """The scan below finds each form of assigning an analyzer's attribute."""
    code = "an.x = 1\nself.an.y += 1\nresult.analyzer.z: int = 2\ndel an.w\nan.v.u = 3\n"
    stored = [(line, name) for line, name, store in _analyzer_attributes(ast.parse(code))
              if store]
    assert sorted(stored) == [(1, "x"), (2, "y"), (3, "z"), (4, "w")]


def test_no_module_assigns_an_analyzer_attribute():
    """The analyzer's state is in parts (registry, counts, failover_state, pending) that
    other modules change through their methods: outside analyzer.py nothing assigns an
    attribute of the analyzer (its views of the parts are read-only properties)."""
    assigned, read = [], set()
    for path in _outside_the_analyzer():
        for line, name, stored in _scan(path)[0]:
            if stored:
                assigned.append("%s:%d %s" % (path.relative_to(REPO), line, name))
            else:
                read.add(name)
    assert assigned == []
    # the scan is not blind: it reads what io.py, the summary and the watcher read
    assert {"path_list", "sessions", "carry", "failover_state", "pending", "counts",
            "registry", "frames", "conns", "stream_paths"} <= read


def test_what_other_modules_read_of_the_analyzer_exists():
    """Every attribute another module or test reads of an analyzer is one it has (a
    renamed part or view would otherwise fail only where it is read), and the views of
    the parts are the parts' own objects, read-only."""
    from rtrs_scapy.analysis.analyzer import Analyzer

    an = Analyzer(keep_messages=True)
    read = {name for path in _outside_the_analyzer()
            for _, name, stored in _scan(path)[0]
            if not stored}
    missing = sorted(name for name in read if not hasattr(an, name))
    # the module analyzer.py (test_failover.py patches ``analyzer.Analyzer``), a dict
    # named ``analyzer`` (test_corpus_referee.py)
    assert missing == ["Analyzer", "items"]
    assert an.path_list is an.registry.path_list and an.carry is an.pending.table
    for view in ("path_list", "sessions", "conns", "frames", "carry", "mirrors"):
        with pytest.raises(AttributeError):
            setattr(an, view, None)


def test_the_scan_sees_a_change_in_place():
    """The scan below finds each form of changing an analyzer's container in place, by
    its name or a local one, and neither a read nor a change of what an item of it
    holds."""
    code = ("an.x[1] = 2\nself.an.y[k] += 1\ndel analyzer.z[0]\nan.w.append(1)\n"
            "self.an.v.setdefault(k, [])\nresult.analyzer.u.clear()\nan.t.pop()\n"
            "an.s.update({})\nan.r[0].append(1)\nq = an.q[0]\nan.p.get(1)\n"
            "def f(an):\n    o = an.o\n    o[1] = 2\n    o.add(3)\n    n = o.get(1)\n"
            "def g(an):\n    m = an.m\n    m = []\n    m.append(1)\n"
            "def h(self):\n    self.an.p.c[1] = 2\n    s = self.an.p\n    s.d.pop()\n"
            "    w = s.e\n    del w[0]\n")
    assert _changed_in_place(ast.parse(code)) == [
        (1, ("x",)), (2, ("y",)), (3, ("z",)), (4, ("w",)), (5, ("v",)), (6, ("u",)),
        (7, ("t",)), (8, ("s",)), (14, ("o",)), (15, ("o",)), (22, ("p", "c")),
        (24, ("p", "d")), (26, ("p", "e"))]


def test_no_module_changes_an_analyzer_container_in_place():
    """Outside analyzer.py, what is changed in place on an analyzer is one of its parts,
    through the part's methods (``an.settle_queue.add(batch)``), never one of its
    dicts, lists or sets, nor a container a view shows (``an.stream_paths[k] = v``)."""
    from rtrs_scapy.analysis.analyzer import Analyzer

    an = Analyzer(keep_messages=True)
    changed, parts = [], set()
    for path in _outside_the_analyzer():
        for line, (name, *_) in _scan(path)[1]:
            if isinstance(getattr(an, name, None), CONTAINERS) or not hasattr(an, name):
                changed.append("%s:%d %s" % (path.relative_to(REPO), line, name))
            else:
                parts.add(name)
    assert changed == []
    assert "settle_queue" in parts     # the scan is not blind: io.py adds its batches


#: (module, part) where a part's containers are changed outside the part's module, by
#: design (docs/design.md's table): io.py finds failovers in capture order, failover.py
#: at the end, both in ``failover_state``
SHARED = {("rtrs_scapy/analysis/io.py", "failover_state")}


def test_a_part_changes_its_containers_itself():
    """A part's dicts, lists and sets (``an.registry.sessions``, ``an.unbound.naks``)
    are changed in place only in the part's own module and the analyzer, through its
    methods elsewhere (``an.registry.add(…)``), but where the table says the part is
    shared (SHARED)."""
    from rtrs_scapy.analysis.analyzer import Analyzer

    an = Analyzer(keep_messages=True)
    changed, shared = [], set()
    for path in _outside_the_analyzer():
        module = str(path.relative_to(REPO))
        for line, chain in _scan(path)[1]:
            part = getattr(an, chain[0], None)
            if len(chain) != 2 or isinstance(part, CONTAINERS) or \
                    not isinstance(getattr(part, chain[1], None), CONTAINERS):
                continue
            own = sys.modules[type(part).__module__].__file__
            if path.resolve() == REPO.joinpath(own).resolve():
                continue
            if (module, chain[0]) in SHARED:
                shared.add((module, chain[0]))
            else:
                changed.append("%s:%d %s" % (module, line, ".".join(chain)))
    assert changed == []
    assert shared == SHARED     # the scan is not blind, and SHARED holds no stale entry


def test_the_analyzer_state_is_in_documented_parts():
    """The analyzer holds no bare container of its own, and each part it holds is a row
    of docs/design.md's table of the analyzer's parts."""
    from rtrs_scapy.analysis.analyzer import Analyzer

    an = Analyzer(keep_messages=True)
    assert [name for name, value in vars(an).items() if isinstance(value, CONTAINERS)] == []
    parts = sorted(name for name, value in vars(an).items()
                   if type(value).__module__.startswith("rtrs_scapy."))
    text = (REPO / "docs" / "design.md").read_text()
    table = text[text.index("## The analyzer's parts"):text.index("## One layout")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [name for name in parts if not any("`%s` (" % name in row.split("|")[1]
                                              for row in rows)] == []
    assert {"registry", "unbound", "control_reads", "records", "settle_queue"} <= set(parts)
