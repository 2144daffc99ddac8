#!/usr/bin/env python
"""Webhook delivery throughput: signed events/s from the outbox to a loopback receiver.

    .venv/bin/python bench/webhooks_bench.py [--quick] [--events N] [--threads T]

Runs on the environment it is given (bench/run.py: the embedded defaults, SQLite
and the in-process broker, as `serve` runs them; with DATABASE_URL/REDIS_URL
set, PostgreSQL and Redis) in a scratch database. The receiver is a plain
HTTP/1.1 server in its own process answering 204. N events (`attachment.ready`
of N files) are written with their deliveries and outbox jobs, 100 per
transaction, as the pipeline writes them; then a Dramatiq worker with T threads
(AIRLOCK_WORKER_THREADS, 4) starts and the clock runs until the database says
every delivery is delivered and the receiver has every webhook-id. Each round
is timed separately; the figure is the median. Prints one JSON line.
Goal: >= 200 events/s.
"""

from __future__ import annotations

import argparse
import http.server
import multiprocessing
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _receiver(port_out, count) -> None:
    """Count the requests (and distinct ids) it receives; answer 204 at once."""
    seen: set[str] = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            webhook_id = self.headers.get("webhook-id", "")
            if self.headers.get("webhook-signature", "").startswith("v1,") and webhook_id not in seen:
                seen.add(webhook_id)
                with count.get_lock():
                    count.value += 1
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_out.put(server.server_address[1])
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--events", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument(
        "--switch",
        default="",
        help="a trick (bench/switches.py): rounds alternate with and without it (ABBA), each side's median reported",
    )
    args = parser.parse_args()
    n = args.events or (600 if args.quick else 2000)
    rounds = 3 if args.quick else 5
    if args.switch:
        rounds *= 2
    os.environ["AIRLOCK_WEBHOOK_ALLOW_PRIVATE"] = "1"

    count = multiprocessing.Value("i", 0)
    ports: multiprocessing.Queue = multiprocessing.Queue()
    receiver = multiprocessing.Process(target=_receiver, args=(ports, count), daemon=True)
    receiver.start()
    port = ports.get(timeout=30)

    from bench import switches
    from bench.common import bench_django, emit, make_user, median

    bench_django()
    import dramatiq
    from django.conf import settings
    from django.db import connection, transaction
    from django.utils import timezone

    from attachments.models import Attachment
    from ops.runtime import start_worker
    from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
    from webhooks.services.emit import emit as emit_events

    threads = args.threads or settings.AIRLOCK_CONCURRENCY.worker_threads
    user = make_user("webhook-bench", "webhook-bench")
    WebhookEndpoint.objects.create(tenant_id=user.membership.tenant_id, url=f"http://127.0.0.1:{port}/hook")
    now = timezone.now()
    rates, emit_rates = [], []
    sides: dict[str, list[float]] = {"with": [], "without": []}
    for round_no in range(rounds):
        side = "without" if args.switch and round_no % 4 in (1, 2) else "with"  # ABBA: drift hits both
        with switches.off(args.switch if side == "without" else ""):
            files = [
                Attachment(
                    tenant_id=user.membership.tenant_id,
                    owner=user,
                    profile="image",
                    filename=f"{i}.jpg",
                    declared_size=1,
                    declared_type="image/jpeg",
                    storage_key=f"bench/{round_no}/{i}",
                    created_at=now,
                    expires_at=now,
                )
                for i in range(n)
            ]
            Attachment.objects.bulk_create(files)
            with count.get_lock():
                count.value = 0
            started = time.perf_counter()
            for i in range(0, n, 100):
                with transaction.atomic():
                    emit_events(event_type="attachment.ready", attachment_ids=[f.pk for f in files[i : i + 100]])
            emit_rates.append(n / (time.perf_counter() - started))

            worker = start_worker(threads=threads)
            started = time.perf_counter()
            deadline = started + 600
            while True:
                # The receiver's count first (no query): the database is asked once it has them all.
                if count.value >= n and not WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).exists():
                    break
                if time.perf_counter() > deadline:
                    raise SystemExit(f"only {count.value} of {n} delivered after 600 s")
                time.sleep(0.02)
            elapsed = time.perf_counter() - started
            worker.stop(timeout=5000)
        connection.close()
        rates.append(n / elapsed)
        sides[side].append(n / elapsed)
        print(
            f"round {round_no} ({side} {args.switch or 'tricks'}): {n / elapsed:.0f} events/s delivered, "
            f"emitted at {emit_rates[-1]:.0f}/s",
            file=sys.stderr,
        )
    dead = WebhookDelivery.objects.exclude(status=DeliveryStatus.DELIVERED).count()
    broker = type(dramatiq.get_broker()).__name__
    receiver.kill()
    if args.switch:
        emit(
            {
                "switch": args.switch,
                "database": connection.vendor,
                **{f"events_per_s_{k}": round(median(v), 1) for k, v in sides.items()},
                **{f"rounds_{k}": [round(x, 1) for x in v] for k, v in sides.items()},
            }
        )
        return
    emit(
        {
            "webhook_delivery_events_per_s": round(median(rates), 1),
            "webhook_delivery_rounds": [round(r, 1) for r in rates],
            "webhook_emit_events_per_s": round(median(emit_rates), 1),
            "webhook_delivery_events": n,
            "webhook_delivery_threads": threads,
            "webhook_delivery_not_delivered": dead,
            "webhook_delivery_database": connection.vendor,
            "webhook_delivery_broker": broker,
        }
    )


if __name__ == "__main__":
    main()
