"""The step contract: one table says which steps apply, steps only read what they are given,
and each decoding step names a job kind of the sandbox's own table (which imports no step)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attachments.facts import FileFacts
from attachments.profiles import get_profile
from processing.errors import ContentRejected
from processing.sandbox import child, kinds, run_job
from processing.steps import StepInput
from processing.steps.registry import DECODERS, decoder_for, steps_for
from tests.sandbox import jobkinds
from tests.support import EICAR, jpeg_bytes, pdf_bytes, zip_bytes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("profile", "derive"),
    [
        ("image", ["image"]),
        ("avatar", ["image"]),
        ("document", ["digest", "pdf"]),
        ("archive", ["digest", "zip"]),
        ("media", ["media"]),  # media: its remuxed copy is served
    ],
)
def test_the_table_says_which_steps_apply(profile: str, derive: list[str]) -> None:
    p = get_profile(profile)
    assert [s.name for s in steps_for("intake", p, None)] == ["intake"]
    assert [s.name for s in steps_for("scan", p, None)] == ["scan"]
    assert [s.name for s in steps_for("derive", p, p.allowed_types[0])] == derive


def test_every_decoding_step_has_a_job_kind_and_the_fork_server_imports_no_step_and_no_django() -> None:
    # The fork server runs with python -I and no Django settings: it must stay free of both.
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "import processing.sandbox.server; from processing.sandbox.kinds import KINDS;"
        "print(json.dumps([sorted(KINDS), sorted(m for m in sys.modules"
        " if m.split('.')[0] == 'django' or m.startswith('processing.steps'))]))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT)], capture_output=True, text=True, check=True)
    job_kinds, imported = json.loads(out.stdout)
    assert job_kinds == ["image", "media", "pdf", "transcode", "variant", "zip"]
    assert imported == []
    assert {d.name for d in DECODERS} <= set(job_kinds)


def test_the_job_runs_whatever_the_sandbox_table_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def probe(src, work, bounds, tools):  # type: ignore[no-untyped-def]
        return {"read": src.read().decode(), "isolate": tools.isolate is child.fork_isolated}, {}

    monkeypatch.setitem(kinds.KINDS, "probe", kinds.JobKind(probe))
    src = tmp_path / "in"
    src.write_bytes(b"abc")
    with open(src, "rb") as fh:
        doc = child.dispatch({"kind": "probe", "bounds": {}}, fh)
    assert doc["outcome"] == "ok" and doc["data"] == {"read": "abc", "isolate": True}
    monkeypatch.delitem(kinds.KINDS, "probe")
    assert child.dispatch({"kind": "probe", "bounds": {}}, src)["reason_code"] == "corrupt"
    with pytest.raises(ValueError, match="unknown sandbox kind"):
        run_job("probe", src, tmp_path / "work")


def _given(profile: str, data: bytes, tmp_path: Path, content_type: str | None = None) -> StepInput:
    path = tmp_path / f"{profile}.bin"
    path.write_bytes(data)
    work = tmp_path / f"{profile}-work"
    work.mkdir()
    return StepInput(
        profile=get_profile(profile),
        size=len(data),
        content_type=content_type,
        head=data[:4096],
        chunks=lambda: iter([data]),
        path=path,
        work_dir=work,
    )


# No `db` fixture: a step that touched the database would fail with "Database access not allowed".
@pytest.mark.parametrize(
    ("profile", "data", "content_type"),
    [
        ("image", jpeg_bytes((320, 200)), "image/jpeg"),
        ("document", pdf_bytes(), "application/pdf"),
        ("archive", zip_bytes({"a.txt": b"hello"}), "application/zip"),
    ],
)
def test_steps_read_what_they_are_given_and_write_neither_database_nor_storage(
    profile: str, data: bytes, content_type: str, tmp_path: Path, storage_root: Path
) -> None:
    given = _given(profile, data, tmp_path)
    facts = [s.run(given) for s in steps_for("intake", given.profile, None)]
    assert facts[0].facts == FileFacts(stored_size=len(data), content_type=content_type)
    (tmp_path / "derive").mkdir()
    given = _given(profile, data, tmp_path / "derive", content_type)
    for stage in ("scan", "derive"):
        for step in steps_for(stage, given.profile, content_type):
            result = step.run(given)
            for made in result.files:  # files are left in the work dir for the pipeline to store
                assert made.path.resolve().parent == given.work_dir.resolve()
    assert not storage_root.exists() or not any(storage_root.rglob("*"))


def test_a_step_rejects_with_a_reason_the_pipeline_records(tmp_path: Path) -> None:
    given = _given("image", EICAR, tmp_path)
    with pytest.raises(ContentRejected) as caught:
        steps_for("intake", given.profile, None)[0].run(given)
    assert caught.value.code == "malware"  # refused for its type, but reported as what it is
    assert decoder_for(get_profile("archive"), None).bound_reason == "archive_limit"
    assert decoder_for(get_profile("media"), None).name == "media"
    # Every kind decodes a profile's uploads, but `variant` and `transcode`, which only a variant request
    # and a video's web rendition name.
    decoders = (decoder_for(get_profile(n), None) for n in ("image", "document", "archive", "media"))
    shipped = {name for name in kinds.KINDS if name not in jobkinds.TEST_KINDS}  # the tests add theirs
    assert shipped - {"variant", "transcode"} == {s.name for s in decoders if s}


def test_no_step_module_reaches_for_the_database_or_storage() -> None:
    sources = {p.name: p.read_text() for p in (ROOT / "processing" / "steps").glob("*.py")}
    for needle in ("attachments.models", "attachments.storage", "get_gateway", ".objects.", "transaction"):
        assert [name for name, text in sources.items() if needle in text] == [], needle


def test_steps_return_typed_facts_that_the_services_map_onto_columns_one_by_one() -> None:
    from dataclasses import fields

    from attachments.models import Attachment
    from attachments.services.processing import facts_columns

    every = FileFacts(**{f.name: f"<{f.name}>" for f in fields(FileFacts)})  # type: ignore[arg-type]
    columns = facts_columns(every)
    assert columns == {f.name: f"<{f.name}>" for f in fields(FileFacts)}  # no fact is dropped on the way
    assert set(columns) <= {f.name for f in Attachment._meta.get_fields()}
    # A fact not found sets nothing; a found one that is falsy (an empty file, no text) is still set.
    assert facts_columns(FileFacts(size=0, text="")) == {"size": 0, "text": ""}
    later = FileFacts(stored_size=1, content_type="image/heic").merge(FileFacts(content_type="image/jpeg"))
    assert later == FileFacts(stored_size=1, content_type="image/jpeg")
