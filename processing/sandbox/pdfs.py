"""PDF decoder: page count by walking the page tree, per-page text, page-1 thumbnail.

- /Count is never trusted (pdfjs/poppler-67295-0.pdf claims 9,999,999,999 pages): the
  tree is walked with a cycle check, a depth limit (same 100 as pypdf's own) and an early
  stop at max_pdf_pages + 1, so nothing is ever allocated per *declared* page.
- Encrypted files get decrypt(""); a real password means we cannot read it: corrupt.
- Text comes from pypdf page by page; a page whose extraction raises (qpdf/issue-117.pdf
  loops inside its content stream) contributes no text and is counted in text_errors.
  Extraction stops once max_text_chars is reached (saves CPU on huge documents).
- The thumbnail is rendered by PDFium through `isolate`, which in the sandbox runs it in
  a forked sub-child: PDFium is C code fed attacker bytes, and a crash there must cost us
  only the thumbnail, not the document (a failed render alone is not a rejection).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

from .limits import Bounds
from .outcome import Rejected, Source, short_repr, write_file

MAX_TREE_DEPTH = 100
Isolate = Callable[..., Any]


def run_inline(fn: Callable[..., Any], *args: Any) -> Any:
    """Default isolate: call directly (in-process use, benchmarks)."""
    return fn(*args)


def _resolve(obj: Any) -> Any:
    return obj.get_object() if isinstance(obj, IndirectObject) else obj


def count_pages(reader: PdfReader, limit: int) -> int:
    """Count leaf pages by walking /Kids; raise page_limit past `limit`, corrupt on bad trees."""
    root = _resolve(reader.trailer["/Root"])
    stack: list[tuple[Any, int]] = [(root["/Pages"], 0)]
    seen: set[tuple[int, int]] = set()
    count = nodes = 0
    while stack:
        ref, depth = stack.pop()
        if isinstance(ref, IndirectObject):
            key = (ref.idnum, ref.generation)
            if key in seen:
                raise Rejected("corrupt", "page tree references a node twice (cycle)")
            seen.add(key)
        node = _resolve(ref)
        if not isinstance(node, DictionaryObject):
            raise Rejected("corrupt", "page tree node is not a dictionary")
        nodes += 1
        if nodes > 4 * limit + 10_000:  # intermediate nodes without pages are still work
            raise Rejected("page_limit", "page tree has too many nodes")
        kind = node.get("/Type")
        if kind == "/Pages" or (kind != "/Page" and "/Kids" in node):
            if depth >= MAX_TREE_DEPTH:
                raise Rejected("corrupt", f"page tree deeper than {MAX_TREE_DEPTH}")
            kids = _resolve(node.get("/Kids"))
            if not isinstance(kids, ArrayObject):
                raise Rejected("corrupt", "page tree /Kids is not an array")
            stack.extend((kid, depth + 1) for kid in reversed(kids))
        else:
            count += 1
            if count > limit:
                raise Rejected("page_limit", f"more than {limit} pages")
    return count


def _extract_text(reader: PdfReader, pages: int, max_chars: int) -> tuple[str, int, int]:
    parts: list[str] = []
    total = errors = 0
    for i in range(pages):
        if total >= max_chars:
            break
        try:
            text = reader.pages[i].extract_text()
        except MemoryError:
            raise  # the address-space limit speaks for the whole document
        except Exception:  # noqa: BLE001 - e.g. LimitReachedError in a looping content stream
            errors += 1  # one bad content stream costs that page's text only
            continue
        parts.append(text[: max_chars - total])
        total += len(parts[-1])
    return "\f".join(parts), total, errors  # form feed between pages, as pdftotext does


def render_thumbnail(source: str | int, work_dir: str, size: int) -> dict[str, int] | None:
    """Render page 1 with PDFium to a WebP whose longest side is `size`.

    `source` is a path, or the fd of the job's input (a confined job has no path to it).
    """
    return render_page(source, work_dir, size, 0, "thumbnail.webp")


def render_page(source: str | int, work_dir: str, size: int, index: int, name: str) -> dict[str, int] | None:
    """Render page `index` (0-based) with PDFium into `name` (WebP, or JPEG for a .jpg name), long side `size`."""
    import pypdfium2 as pdfium  # imported lazily: preloaded in the fork server anyway

    if isinstance(source, int):
        # The job waits for this sub-child and reads nothing after it: sharing the offset is fine.
        pdf = pdfium.PdfDocument(os.fdopen(os.dup(source), "rb"), autoclose=True)
    else:
        pdf = pdfium.PdfDocument(source)  # PDFium tries the empty user password itself
    try:
        if len(pdf) <= index:
            return None
        page = pdf[index]
        width, height = page.get_size()
        if not (width > 0 and height > 0):
            return None
        image = page.render(scale=size / max(width, height)).to_pil().convert("RGB")
        image.thumbnail((size, size))  # page /Rotate or rounding may overshoot by a pixel
        image.info = {}
        buf = io.BytesIO()
        if name.endswith(".jpg"):
            image.save(buf, "JPEG", quality=82)
        else:
            image.save(buf, "WEBP", quality=80)
        write_file(Path(work_dir), name, buf.getvalue())
        return {"width": image.width, "height": image.height}
    finally:
        pdf.close()


def page_variant(
    src: Source, work_dir: Path, bounds: Bounds, isolate: Isolate = run_inline
) -> tuple[dict[str, Any], dict[str, str]]:
    """The `variant` job on a PDF: page Bounds.variant_page (1-based) at Bounds.variant_size, for the console.

    The same PDFium render as the page-1 thumbnail, in the same isolated sub-child: a
    crash costs this page only.
    """
    if bounds.variant_page < 1 or bounds.variant_size <= 0 or bounds.variant_format not in ("webp", "jpeg"):
        raise Rejected("corrupt", "no page, size or format asked for")
    source: str | int = str(src) if isinstance(src, (str, Path)) else src.fileno()
    name = "page.jpg" if bounds.variant_format == "jpeg" else "page.webp"
    try:
        made = isolate(render_page, source, str(work_dir), bounds.variant_size, bounds.variant_page - 1, name)
    except Exception:  # noqa: BLE001 - a crashed render sub-child included
        raise Rejected("corrupt", f"page {bounds.variant_page} does not render") from None
    if not made:
        raise Rejected("corrupt", f"no page {bounds.variant_page} to render")
    data = {"width": int(made["width"]), "height": int(made["height"])}
    return data, {"variant": name}


def process(
    src: Source, work_dir: Path, bounds: Bounds, isolate: Isolate = run_inline
) -> tuple[dict[str, Any], dict[str, str]]:
    """Count pages, extract text and render a thumbnail for one PDF; return (data, files)."""
    source: str | int
    if isinstance(src, (str, Path)):
        reader, source = PdfReader(str(src), strict=False), str(src)
    else:
        reader, source = PdfReader(src, strict=False), src.fileno()
    encrypted = bool(reader.is_encrypted)
    if encrypted:
        try:
            result = reader.decrypt("")
        except Exception as exc:  # noqa: BLE001 - any failure to decrypt means unreadable
            raise Rejected("corrupt", f"cannot decrypt: {type(exc).__name__}") from None
        if result == PasswordType.NOT_DECRYPTED:
            raise Rejected("corrupt", "PDF is protected by a password")
    page_count = count_pages(reader, bounds.max_pdf_pages)
    try:
        readable = min(page_count, len(reader.pages))
    except Exception as exc:  # noqa: BLE001 - pypdf's own flattening disagrees: broken tree
        raise Rejected("corrupt", f"page tree: {short_repr(exc)}") from None
    text, chars, text_errors = _extract_text(reader, readable, bounds.max_text_chars)
    files = {"text": write_file(work_dir, "text.txt", text.encode("utf-8", "replace"))}
    data: dict[str, Any] = {
        "page_count": page_count,
        "text_chars": chars,
        "text_truncated": chars >= bounds.max_text_chars,
        "text_errors": text_errors,
        "encrypted": encrypted,
    }
    if page_count:
        try:
            thumb = isolate(render_thumbnail, source, str(work_dir), bounds.thumbnail_size)
        except Exception:  # noqa: BLE001 - a thumbnail is optional
            thumb = None  # includes a crashed render sub-child
        if thumb:
            data["thumbnail"] = {"width": int(thumb["width"]), "height": int(thumb["height"])}
            files["thumbnail"] = "thumbnail.webp"
    return data, files
