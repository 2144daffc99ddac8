"""Every state change goes through the services: no other module calls a transition or writes rows.

The code is read, not run: a call that no test happens to reach is still found.
A violation is a use of `apply_transition`, a `getattr(x, "<transition>")`, or a
call of one of the model's transition methods (`start`, `finish`, `reject`, …)
on something that looks like an attachment (its name says so, or the call passes
a transition's keyword arguments). `thread.start()` and DRF's `self.fail()` are
not attachments.

Rows are written only in their app's services too: the attachments app's models
(Attachment, DeadLetter, Tenant, …, and the accounts: User, Group) in
attachments/services, the webhooks app's in webhooks/services. A write is a
`create`/`update`/`delete`/`get_or_create`/`update_or_create`/`bulk_*` on a
model's manager or a queryset of it, and a `save()`/`delete()` on an instance,
wherever the code shows what it holds: a name bound to `Model.objects.get(…)`, to
`Model(…)`, to a `get_or_create` result or a loop over a queryset, a parameter
annotated with the model, or what a function returns when its annotation or its
return statements say so (a service's `-> Attachment` included). What only the
running code knows (a model taken from a variable) is out of the scan's sight:
the sweeper's retention, the one such place, is checked at run time instead.

An app's services are its `services/` package and, in each concern package of
the app (docs/architecture.md, "A folder per concern"), that concern's
`services.py` or `services/` package: the same rule one level down, so a concern
gathers its writes beside its api, admin and selectors without those becoming
homes (tests/architecture/homes.py).
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from attachments.models import Attachment
from tests.architecture.homes import HOMES, home_of

ROOT = Path(__file__).resolve().parents[2]
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


def _transition_offenders(planted: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """`path: [line: code]` for every transition call outside the attachments app's services, over the tree
    and any `planted` sources (relative path -> source) as if they were files of it."""
    sources = {
        path: path.read_text(encoding="utf-8")
        for path in _python_files()
        if (ROOT / "tests") not in path.parents and path.is_file()
    }
    sources |= {ROOT / where: source for where, source in (planted or {}).items()}
    offenders = {}
    for path, source in sources.items():
        if home_of(path) != "attachments":
            calls = _transitions_in(source)
            if calls:
                offenders[str(path.relative_to(ROOT))] = calls
    return offenders


@functools.cache
def _transitions_in(source: str) -> list[str]:
    return transition_calls(source)


def test_no_module_outside_attachments_services_calls_a_transition():
    assert {"start", "finish", "reject", "fail", "retry", "release", "take_down", "restore", "rescan"} <= set(
        transition_methods()
    )
    assert _transition_offenders() == {}, "state changes belong in attachments' services (attachment_<verb> functions)"


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


# Writes of rows: on a manager or queryset (`update`, `delete`, `bulk_*`, `*create*`) and on an
# instance (`save`, `delete`). `create_user` is the user manager's `create`.
WRITES = {
    "update",
    "delete",
    "bulk_update",
    "bulk_create",
    "create",
    "get_or_create",
    "update_or_create",
    "save",
    "create_user",
    "create_superuser",
}
MANAGERS = {"objects", "_default_manager", "_base_manager"}
# Queryset methods whose result is still rows of the model (a queryset or an instance).
ROW_METHODS = {
    "all",
    "by_pk",
    "create",
    "create_superuser",
    "create_user",
    "defer",
    "distinct",
    "earliest",
    "exclude",
    "filter",
    "first",
    "get",
    "get_or_create",
    "in_bulk",
    "last",
    "latest",
    "none",
    "only",
    "order_by",
    "prefetch_related",
    "select_for_update",
    "select_related",
    "update_or_create",
    "using",
}
# The product's accounts (django.contrib.auth's users and groups) are the attachments app's.
AUTH_MODELS = {"User", "Group", "Permission"}


def guarded_models() -> dict[str, set[str]]:
    """The class names of the models each home guards (attachments: Attachment, DeadLetter, Tenant, …, User, Group)."""
    from django.apps import apps

    found = {app: {model.__name__ for model in apps.get_app_config(app).get_models()} for app in HOMES}
    found["attachments"] |= AUTH_MODELS | {"get_user_model"}  # `User = get_user_model()` names the user model
    return found


_BINDING = (ast.Assign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)
_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@functools.lru_cache(maxsize=4)
def _scopes(tree: ast.Module) -> dict[ast.AST, tuple[list[ast.AST], list[ast.expr]]]:
    """For the module and each function in it: what binds names there and what it returns (its own, not
    its nested functions')."""
    scopes: dict[ast.AST, tuple[list[ast.AST], list[ast.expr]]] = {}

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPE):
                scopes[child] = ([], [])
                visit(child, child)
                continue
            if isinstance(child, _BINDING):
                scopes[scope][0].append(child)
            elif isinstance(child, ast.Return) and child.value is not None:
                scopes[scope][1].append(child.value)
            visit(child, scope)

    scopes[tree] = ([], [])
    visit(tree, tree)
    return scopes


def _mentions(annotation: ast.expr | None, models: set[str]) -> bool:
    """True when a type annotation names one of `models` (`DeadLetter | None`, "QuerySet[Attachment]")."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(isinstance(n, ast.Name) and n.id in models for n in ast.walk(annotation))


class _Rows:
    """Which expressions of a module are rows of a guarded model: a model's manager and the querysets and
    instances it gives, a model built (`DeadLetter(...)`), what `get_object_or_404(Model, …)` returns, what a
    function returns when its annotation or its return statements say so, and names bound to any of these
    (assigned, unpacked from `get_or_create`, looped over, or a parameter annotated with the model)."""

    def __init__(self, tree: ast.Module, models: set[str], imported_rows: set[str]):
        self.models = models
        self.functions = set(imported_rows)  # functions whose result is rows
        self.scopes = _scopes(tree)
        defs = [n for n in self.scopes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.functions |= {node.name for node in defs if _mentions(node.returns, models)}
        for _ in range(3):  # a helper may return another helper's rows: a few rounds reach the fixpoint
            for node in defs:
                returned = self.scopes[node][1]
                if node.name not in self.functions and returned:
                    bound = self._bound(node)
                    if any(self.is_rows(value, bound) for value in returned):
                        self.functions.add(node.name)
        self.module_names = self._bound(tree)

    def _bound(self, scope: ast.AST, outer: frozenset[str] = frozenset()) -> set[str]:
        """The names a scope binds to rows (flow-insensitive: a name once bound to rows stays suspect)."""
        names = set(outer)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = scope.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if _mentions(arg.annotation, self.models):
                    names.add(arg.arg)
        bindings = self.scopes[scope][0]
        for node in bindings:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if _mentions(node.annotation, self.models):
                    names.add(node.target.id)
        grew = True
        while grew:  # `a = Model.objects.filter(…)` then `b = a.first()`: until no name is added
            grew = False
            for node in bindings:
                if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    value, targets = node.iter, [node.target]
                elif isinstance(node, ast.Assign):
                    value, targets = node.value, node.targets
                else:
                    value, targets = node.value, [node.target]
                if value is None or not self.is_rows(value, names):
                    continue
                for target in targets:
                    if isinstance(target, (ast.Tuple, ast.List)) and target.elts:
                        target = target.elts[0]  # `row, created = Model.objects.get_or_create(…)`
                    if isinstance(target, ast.Name) and target.id not in names:
                        names.add(target.id)
                        grew = True
        return names

    def is_rows(self, node: ast.expr, names: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Attribute):
            if node.attr in MANAGERS:
                owner = node.value
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name):
                    owner = owner.func  # get_user_model().objects
                return isinstance(owner, ast.Name) and owner.id in self.models
            return False
        if isinstance(node, ast.Subscript):
            return self.is_rows(node.value, names)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if func.id in self.models or func.id in self.functions:
                    return True
                if func.id in ("get_object_or_404", "get_list_or_404") and node.args:
                    first = node.args[0]
                    return (isinstance(first, ast.Name) and first.id in self.models) or self.is_rows(first, names)
                return False
            if isinstance(func, ast.Attribute):
                if func.attr in self.functions and isinstance(func.value, ast.Name) and func.value.id not in names:
                    return True  # `module.helper(…)` of an imported module's helper
                return func.attr in ROW_METHODS and self.is_rows(func.value, names)
        return False

    def writes(self, tree: ast.Module) -> list[ast.Call]:
        found: list[ast.Call] = []
        self._writes(tree, frozenset(self.module_names), found)
        return sorted(found, key=lambda n: (n.lineno, n.col_offset))

    def _writes(self, scope: ast.AST, outer: frozenset[str], found: list[ast.Call]) -> None:
        names = self._bound(scope, outer) if scope is not None else set(outer)
        for node in ast.iter_child_nodes(scope):
            self._visit(node, names, found)

    def _visit(self, node: ast.AST, names: set[str], found: list[ast.Call]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    self._visit(default, names, found)
            self._writes(node, frozenset(names), found)
            return
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in WRITES
            and self.is_rows(node.func.value, names)
        ):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            self._visit(child, names, found)


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve(node: ast.ImportFrom, path: Path | None) -> str:
    if node.level == 0 or path is None:
        return node.module or ""
    package = list(path.relative_to(ROOT).parent.parts)
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, node.module] if node.module else package)


@functools.cache
def _row_functions_of(module: str, models: frozenset[str]) -> set[str]:
    """The top-level functions of a module of the tree whose result is rows of `models`."""
    path = _module_file(module)
    if path is None:
        return set()
    return _Rows(ast.parse(path.read_text(encoding="utf-8")), models, set()).functions


def _imported_rows(tree: ast.Module, models: set[str], path: Path | None) -> set[str]:
    """Names imported from the tree's modules that are functions returning rows (`lock_attachment`, …)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _resolve(node, path)
            if module.split(".")[0] not in HOMES | {"processing": None, "sweeper": None}:
                continue
            functions = _row_functions_of(module, frozenset(models))
            found |= {alias.asname or alias.name for alias in node.names if alias.name in functions}
    return found


def model_row_writes(source: str, models: set[str] | None = None, *, path: Path | None = None) -> list[str]:
    """`line: code` for every write of a guarded model's rows: through its manager and querysets
    (`<Model>.objects….delete()`, also through a helper that returns such a chain), and on an instance
    the code can see is one (`letter.save()` where `letter = DeadLetter.objects.get(…)`)."""
    return _writes_of(ast.parse(source), guarded_models()["attachments"] if models is None else models, path)


def _writes_of(tree: ast.Module, models: set[str], path: Path | None) -> list[str]:
    rows = _Rows(tree, models, _imported_rows(tree, models, path))
    return [f"{node.lineno}: {ast.unparse(node)}" for node in rows.writes(tree)]


def test_the_guard_knows_the_guarded_models():
    guarded = guarded_models()
    assert {
        "Attachment",
        "DeadLetter",
        "Tenant",
        "TenantUsage",
        "Membership",
        "RescanCheckpoint",
        "User",
        "Group",
    } <= guarded["attachments"]
    assert {"WebhookEndpoint", "WebhookEvent", "WebhookDelivery", "WebhookAttempt"} <= guarded["webhooks"]


def _offenders(planted: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """`path: [line: code]` for every write outside its home, over the tree and any `planted` sources
    (relative path -> source) as if they were files of it."""
    # Migrations and the operator's scripts/ and bench/ set rows up by hand; the product does not.
    # The example host apps and the clients are not Airlock: their models are their own.
    outside = (ROOT / "tests", ROOT / "scripts", ROOT / "bench", ROOT / "examples", ROOT / "clients")
    sources = {
        path: path.read_text(encoding="utf-8")
        for path in _python_files()
        if not any(o in path.parents for o in outside) and "migrations" not in path.parts and path.is_file()
    }
    sources |= {ROOT / where: source for where, source in (planted or {}).items()}
    offenders: dict[str, list[str]] = {}
    for path, source in sources.items():
        for app, writes in _writes_by_app(path, source):
            if home_of(path) != app and writes:
                offenders.setdefault(str(path.relative_to(ROOT)), []).extend(writes)
    return offenders


@functools.cache
def _writes_by_app(path: Path, source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each guarded app's row writes in one file (kept: the planted runs read the same tree again)."""
    tree = ast.parse(source)
    return tuple((app, tuple(_writes_of(tree, models, path))) for app, models in guarded_models().items())


def test_no_module_outside_its_apps_services_writes_its_rows():
    assert _offenders() == {}, (
        "rows of attachments' (and auth's) models are written in attachments' services, webhooks' in webhooks'"
    )


def test_retention_deletes_guarded_rows_through_their_services():
    """The sweeper's retention names its tables' models at run time, where the scan cannot see them."""
    from django.utils import timezone

    from sweeper.retention import RULES

    now = timezone.now()
    for table, rule in RULES.items():
        app = rule.rows(now).model._meta.app_label
        if app in HOMES:
            assert rule.purge is not None, f"{table}: {app} rows are deleted by {app}/services"
            module = rule.purge.__module__.split(".")
            assert home_of(ROOT.joinpath(*module).with_suffix(".py")) == app, table


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
        "User.objects.create_user(username='x')\n"
    )
    assert len(caught) == 9, caught
    assert (
        model_row_writes(
            "Attachment.objects.filter(pk=pk).values_list('pk')\nDeadLetter.objects.filter(resolved_at=None).count()\n"
            "Attachment.objects.get(pk=pk)\nUser.objects.filter(is_staff=True)\nqueue.update(x=1)\n"
        )
        == []
    )


def test_the_write_scan_finds_instance_writes():
    models = {"Attachment", "DeadLetter", "RescanCheckpoint", "Tenant"}
    source = """
def a(pk):
    letter = DeadLetter.objects.select_for_update().get(pk=pk)
    letter.save(update_fields=["resolved_at"])
def b(checkpoint: RescanCheckpoint):
    checkpoint.save()
def c():
    row, _ = Tenant.objects.get_or_create(slug="x")
    row.delete()
def d(ids):
    for attachment in Attachment.objects.filter(pk__in=ids):
        attachment.save()
def e():
    DeadLetter(kind="sweep").save()
    rows = Attachment.objects.filter(status="ready")
    rows.update(status="x")
    rows[0].delete()
def _locked(pk) -> Attachment | None:
    return None
def f(pk):
    if (found := _locked(pk)) is not None:
        found.save()
def g(pk):
    get_object_or_404(Attachment, pk=pk).delete()
"""
    caught = model_row_writes(source, models)
    assert [line.split(":")[0] for line in caught] == ["4", "6", "8", "9", "12", "14", "16", "17", "22", "24"], caught


def test_the_write_scan_leaves_other_saves_alone():
    models = {"Attachment", "DeadLetter"}
    source = """
def a(im, buf, gateway, form, pk):
    im.save(buf, "PNG")
    gateway.delete("key")
    digest.update(b"x")
    letter = DeadLetter.objects.get(pk=pk)
    history = letter.history
    history.append(1)
    payload = {}
    payload.update(a=1)
    User.objects.filter(pk=1).update(is_staff=True)
    thing = Other.objects.get(pk=1)
    thing.save()
"""
    assert model_row_writes(source, models) == []


def test_the_write_scan_follows_a_function_imported_from_the_services():
    # lock_attachment (attachments/services/transitions.py) says it returns an Attachment.
    source = "from attachments.services.transitions import lock_attachment\nlock_attachment(pk).save()\n"
    assert model_row_writes(source, path=ROOT / "processing" / "x.py") == ["2: lock_attachment(pk).save()"]


PLANTED_VIEW = """
from rest_framework.views import APIView

from attachments.models import Attachment


class Planted(APIView):
    def post(self, request, pk):
        attachment = Attachment.objects.get(pk=pk, tenant=request.tenant)
        attachment.description = request.data["description"]
        attachment.save(update_fields=["description"])
"""

PLANTED_PERMISSION = """
from django.contrib.auth.models import Group
from rest_framework.permissions import BasePermission


class IsModerator(BasePermission):
    def has_permission(self, request, view):
        group, _ = Group.objects.get_or_create(name="moderator")
        return request.user.groups.filter(pk=group.pk).exists()
"""


PLANTED_SELECTOR = """
from attachments.models import Derivative


def stored_variants(attachment_id, kinds):
    Derivative.objects.bulk_create([Derivative(attachment_id=attachment_id, kind=k) for k in kinds])
    return Derivative.objects.filter(attachment_id=attachment_id)
"""

PLANTED_DELETE = """
from attachments.models import Derivative


def variant_drop(attachment_id, kind):
    derivative = Derivative.objects.get(attachment_id=attachment_id, kind=kind)
    derivative.delete()
"""

PLANTED_TRANSITION = """
from attachments.models import Attachment


def variant_gone(pk):
    attachment = Attachment.objects.get(pk=pk)
    attachment.fail(code="variant_gone", message="x")
"""

SAVE = "11: attachment.save(update_fields=['description'])"
GET_OR_CREATE = "8: Group.objects.get_or_create(name='moderator')"
BULK_CREATE = "6: Derivative.objects.bulk_create([Derivative(attachment_id=attachment_id, kind=k) for k in kinds])"


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("attachments/api/planted.py", PLANTED_VIEW, SAVE),
        ("attachments/planted_permission.py", PLANTED_PERMISSION, GET_OR_CREATE),
        # A concern package's api, admin, views, selectors and permissions are no homes.
        ("attachments/variants/api.py", PLANTED_VIEW, SAVE),
        ("attachments/variants/views.py", PLANTED_VIEW, SAVE),
        ("attachments/variants/permissions.py", PLANTED_PERMISSION, GET_OR_CREATE),
        ("attachments/variants/selectors.py", PLANTED_SELECTOR, BULK_CREATE),
        ("attachments/variants/admin.py", PLANTED_DELETE, "7: derivative.delete()"),
        # Nor is a module named services in a layer folder, or one that only looks like a concern's.
        ("attachments/api/services.py", PLANTED_VIEW, SAVE),
        ("attachments/admin/services/planted.py", PLANTED_DELETE, "7: derivative.delete()"),
        ("attachments/variants/services_extra.py", PLANTED_DELETE, "7: derivative.delete()"),
    ],
)
def test_the_guard_fails_on_a_planted_write(where, source, expected):
    """The guard run over the tree with one file planted in it names that file and its write, and nothing else."""
    offenders = _offenders({where: source})
    assert offenders == {where: [expected]}


@pytest.mark.parametrize(
    "where",
    [
        "attachments/services/planted.py",
        "attachments/variants/services/planted.py",
        "attachments/variants/services/__init__.py",
        "attachments/retention/services.py",
    ],
)
def test_a_concerns_services_are_a_home_for_writes(where):
    """Writes planted in the app's services or in a concern's `services.py` / `services/` are not offences."""
    assert home_of(ROOT / where) == "attachments"
    for source in (PLANTED_VIEW, PLANTED_PERMISSION, PLANTED_SELECTOR, PLANTED_DELETE):
        assert _offenders({where: source}) == {}


@pytest.mark.parametrize(
    ("where", "offends"),
    [
        ("attachments/variants/api.py", True),
        ("attachments/variants/admin.py", True),
        ("attachments/variants/selectors.py", True),
        ("attachments/api/services.py", True),
        ("webhooks/services/planted.py", True),
        ("attachments/variants/services/planted.py", False),
        ("attachments/variants/services.py", False),
        ("attachments/services/planted.py", False),
    ],
)
def test_the_transition_guard_draws_the_same_line(where, offends):
    """A transition planted in a concern's services passes; in its api, admin or selectors (or another app) fails."""
    expected = {where: ["7: attachment.fail(code='variant_gone', message='x')"]} if offends else {}
    assert _transition_offenders({where: PLANTED_TRANSITION}) == expected
