"""The type stubs say what the native module takes: every class, method and function of
``trellis/_trellis.pyi`` with the parameter names and defaults of the real one."""

import ast
import inspect
from pathlib import Path

import trellis
from trellis import _trellis

STUB = Path(trellis.__file__).with_name("_trellis.pyi")


def stub_params(fn: ast.FunctionDef):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args]
    defaults = [None] * (len(names) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    params = list(zip(names, defaults))
    params += [(x.arg, ast.literal_eval(d) if d is not None else None) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.vararg:
        params.append(("*" + a.vararg.arg, None))
    if a.kwarg:
        params.append(("**" + a.kwarg.arg, None))
    return [p for p in params if p[0] not in ("self",)]


def real_params(obj):
    out = []
    for p in inspect.signature(obj).parameters.values():
        if p.name == "self":
            continue
        name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        default = None if p.default is p.empty else p.default
        out.append((name, list(default) if isinstance(default, tuple) else default))
    return out


def normalize(params):
    return [(n, list(d) if isinstance(d, tuple) else d) for n, d in params]


def test_stubs_match_the_module():
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    checked = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert normalize(stub_params(node)) == real_params(getattr(_trellis, node.name)), node.name
            checked += 1
        elif isinstance(node, ast.ClassDef):
            cls = getattr(_trellis, node.name)
            for item in node.body:
                if not isinstance(item, ast.FunctionDef) or any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                    continue
                target = cls if item.name == "__init__" else getattr(cls, item.name)
                assert normalize(stub_params(item)) == real_params(target), f"{node.name}.{item.name}"
                checked += 1
    assert checked >= 20
    public = {n for n in dir(_trellis) if not n.startswith("__")}
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {"build"}
    assert public == stubbed
