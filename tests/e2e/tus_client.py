"""A tus client in a process of its own (tuspy), as an app resuming after it was closed would be.

    python tests/e2e/tus_client.py BASE TOKEN FILE URL_STORE [--stop-at N] [--chunk N] [--checksum]

Uploads FILE to BASE/api/v1/tus/ as profile `media`, remembering the upload URL
in URL_STORE (tuspy's FileStorage, keyed by the file's fingerprint): a second run
finds it, asks the server for the offset (HEAD) and sends only the rest. Prints
the upload URL and the offset reached.
"""

from __future__ import annotations

import argparse
import sys

from tusclient.client import TusClient
from tusclient.storage.filestorage import FileStorage


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("token")
    parser.add_argument("file")
    parser.add_argument("store")
    parser.add_argument("--stop-at", type=int, default=None)
    parser.add_argument("--chunk", type=int, default=1 << 20)
    parser.add_argument("--checksum", action="store_true")
    parser.add_argument("--profile", default="media")
    parser.add_argument("--content-type", default="video/mp4")
    parser.add_argument("--url", default=None, help="resume this upload URL")
    args = parser.parse_args(argv)
    client = TusClient(f"{args.base}/api/v1/tus/", headers={"Authorization": f"Token {args.token}"})
    uploader = client.uploader(
        args.file,
        url=args.url,
        chunk_size=args.chunk,
        store_url=True,
        url_storage=FileStorage(args.store),
        upload_checksum=args.checksum,
        metadata={"profile": args.profile, "filename": "clip.mp4", "content_type": args.content_type},
    )
    print(f"start {uploader.url} {uploader.offset}", flush=True)
    uploader.upload(stop_at=args.stop_at)
    print(f"done {uploader.url} {uploader.offset}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
