"""Every state change goes through attachments/services: no other module calls a transition or writes rows.

The code is read, not run: a call that no test happens to reach is still found.
A violation is a use of `apply_transition`, a `getattr(x, "<transition>")`, or a
call of one of the model's transition methods (`start`, `finish`, `reject`, …)
on something that looks like an attachment (its name says so, or the call passes
a transition's keyword arguments). `thread.start()` and DRF's `self.fail()` are
not attachments. Rows of any attachments model (Attachment, DeadLetter, Tenant, …)
are written only there too: no `<Model>.objects….create/update/delete(…)` elsewhere.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from pathlib import Path

from attachments.models import Attachment

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "attachments" / "services"
ATTACHMENT_LIKE = re.compile(r"attach|^(row|obj|instance|locked)$", re.IGNORECASE)


def transition_methods() -> dict[str, set[str]]:
    """The model's transition methods (read from django-fsm's marks) and their keyword arguments."""
    found = {}
    for name, member in inspect.getmembers(Attachment, callable):
        if hasattr(member, "_django_fsm"):
            params = inspect.signature(member).parameters
            found[name] = {p for p in params if p != "self"}
    return found


def _receiver_names(node: ast.expr) -> list[str]:
    """Every name in the receiver's chain: `Attachment.objects.get(pk=pk)` gives Attachment, objects, get."""
    return [
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    ]


def transition_calls(source: str, methods: dict[str, set[str]] | None = None) -> list[str]:
    """`line: code` for every transition call in the source."""
    methods = transition_methods() if methods is None else methods
    keywords = set().union(*methods.values())
    found = []
    for node in ast.walk(ast.parse(source)):
        hit = False
        if isinstance(node, ast.Name) and node.id == "apply_transition":
            hit = True
        elif isinstance(node, ast.Attribute) and node.attr == "apply_transition":
            hit = True
        elif isinstance(node, ast.alias) and node.name == "apply_transition":
            hit = True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            hit = any(isinstance(arg, ast.Constant) and arg.value in methods for arg in node.args[1:2])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods:
            hit = bool(
                any(ATTACHMENT_LIKE.search(name) for name in _receiver_names(node.func.value))
                or {k.arg for k in node.keywords} & keywords
            )
        if hit:
            found.append(f"{getattr(node, 'lineno', '?')}: {ast.unparse(node)}")
    return found


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.py"],
        capture_output=True,
        check=True,
    ).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_module_outside_attachments_services_calls_a_transition():
    methods = transition_methods()
    assert {"start", "finish", "reject", "fail", "retry", "release", "take_down", "restore", "rescan"} <= set(methods)
    offenders = {}
    for path in _python_files():
        if HOME in path.parents or (ROOT / "tests") in path.parents or not path.is_file():
            continue
        calls = transition_calls(path.read_text(encoding="utf-8"), methods)
        if calls:
            offenders[str(path.relative_to(ROOT))] = calls
    assert offenders == {}, "state changes belong in attachments/services (attachment_<verb> functions)"


def test_the_scan_finds_transition_calls_and_leaves_threads_alone():
    caught = transition_calls(
        "from attachments.services.transitions import apply_transition\n"
        "attachment.finish(now=now)\n"
        "row.reject(code='corrupt', message='bad')\n"
        "Attachment.objects.get(pk=pk).retry()\n"
        "locked.start(lease_token=token, lease_expires_at=deadline)\n"
        "getattr(a, 'take_down')(message='x')\n"
        "thing.release(lease_token=token)\n"
        "apply_transition(a, 'rescan', actor='x')\n"
    )
    assert len(caught) == 8, caught
    assert (
        transition_calls(
            "thread.start()\nself.fail('invalid')\nserver.start()\nmatch.start()\n"
            "worker.finish()\nslots.release(t, h)\n"
        )
        == []
    )


WRITES = {"update", "delete", "bulk_update", "bulk_create", "create", "get_or_create", "update_or_create"}
MANAGERS = {"objects", "_default_manager", "_base_manager"}


def attachments_models() -> set[str]:
    """The class names of every model of the attachments app (Attachment, DeadLetter, Tenant, …)."""
    from django.apps import apps

    return {model.__name__ for model in apps.get_app_config("attachments").get_models()}


def _is_model_chain(node: ast.expr, models: set[str]) -> bool:
    names = _receiver_names(node)
    return bool(models & set(names)) and bool(MANAGERS & set(names))


def _queryset_helpers(tree: ast.AST, models: set[str]) -> set[str]:
    """Functions of the module that return a `<Model>.objects…` chain (`def purgeable(now): return …`)."""
    helpers = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None and _is_model_chain(inner.value, models):
                    helpers.add(node.name)
    return helpers


def model_row_writes(source: str, models: set[str] | None = None) -> list[str]:
    """`line: code` for every `<Model>.objects….<write>(…)` chain of a guarded model, also through a helper."""
    models = attachments_models() if models is None else models
    tree = ast.parse(source)
    helpers = _queryset_helpers(tree, models)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            if _is_model_chain(node.func.value, models) or helpers & set(_receiver_names(node.func.value)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_guard_knows_the_attachments_models():
    assert {
        "Attachment",
        "DeadLetter",
        "Tenant",
        "TenantUsage",
        "Membership",
        "RescanCheckpoint",
    } <= attachments_models()


def test_no_module_outside_attachments_services_writes_attachments_rows():
    # Migrations and the operator's scripts/ and bench/ set rows up by hand; the product does not.
    outside = (ROOT / "tests", ROOT / "scripts", ROOT / "bench")
    models = attachments_models()
    offenders = {}
    for path in _python_files():
        if (
            HOME in path.parents
            or any(o in path.parents for o in outside)
            or "migrations" in path.parts
            or not path.is_file()
        ):
            continue
        writes = model_row_writes(path.read_text(encoding="utf-8"), models)
        if writes:
            offenders[str(path.relative_to(ROOT))] = writes
    assert offenders == {}, "rows of the attachments app's models are written in attachments/services"


def test_the_write_scan_finds_queryset_writes_and_leaves_reads_alone():
    caught = model_row_writes(
        "Attachment.objects.filter(pk=pk).update(updated_at=now)\n"
        "Attachment.objects.create(id=pk)\n"
        "Attachment.objects.filter(lifecycle='deleted').delete()\n"
        "def purgeable(now):\n    return Attachment.objects.filter(lifecycle='deleted')\n"
        "purgeable(now).filter(pk__in=ids).delete()\n"
        "DeadLetter.objects.create(kind='message', last_error='malformed')\n"
        "DeadLetter.objects.filter(pk=1).update(resolved_at=now)\n"
        "TenantUsage.objects.get_or_create(tenant_id=1)\n"
        "Attachment._base_manager.filter(pk=pk).delete()\n"
    )
    assert len(caught) == 8, caught
    assert (
        model_row_writes(
            "Attachment.objects.filter(pk=pk).values_list('pk')\nDeadLetter.objects.filter(resolved_at=None).count()\n"
            "Attachment.objects.get(pk=pk)\nUser.objects.create_user(username='x')\nqueue.update(x=1)\n"
        )
        == []
    )
