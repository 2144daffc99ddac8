"""All-in-one: web + in-process worker + scheduler ticks, in one foreground process."""

from __future__ import annotations

import logging
import signal
import sys

from django.core.management.base import BaseCommand

log = logging.getLogger("airlock.serve")


class Command(BaseCommand):
    help = "Run Airlock: web server, Dramatiq worker threads and scheduler ticks in one process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="web only (workers run elsewhere)")
        parser.add_argument("--no-scheduler", action="store_true", help="no in-process ticks (cron or a scheduler runs them)")
        parser.add_argument("--threads", type=int, default=None, help="worker threads")

    def _ensure_bucket(self) -> None:
        from attachments.storage import get_gateway

        gateway = get_gateway()
        ensure = getattr(gateway, "ensure_bucket", None)
        if ensure is None:
            return
        try:
            if ensure():
                log.warning("created the missing S3 bucket", extra={"bucket": gateway.bucket})
        except Exception as exc:  # readyz reports storage trouble; serving starts anyway
            log.warning("could not check the S3 bucket", extra={"error": str(exc)[:300]})

    def handle(self, *args, **opts):
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer, get_internal_wsgi_application
        import socketserver

        from attachments.bootstrap import migrate_on_first_run
        from attachments.permissions import ensure_moderator_group
        from processing.recovery import redrive_pending
        from processing.runtime import Scheduler, start_worker

        migrate_on_first_run()  # embedded default / brand-new database only; said in the log
        ensure_moderator_group()
        self._ensure_bucket()
        worker = None
        if not opts["no_worker"]:
            worker = start_worker(threads=opts["threads"])
            # Messages of an in-process broker die with the process: re-drive at start.
            redrive_pending(older_than_seconds=0)
        scheduler = None
        if not opts["no_scheduler"]:
            scheduler = Scheduler()
            scheduler.start()

        class ThreadedServer(socketserver.ThreadingMixIn, WSGIServer):
            daemon_threads = True
            request_queue_size = 128

        class QuietHandler(WSGIRequestHandler):
            def log_message(self, format, *args):  # access logs are the proxy's job
                return

        server = ThreadedServer((opts["host"], opts["port"]), QuietHandler, ipv6=":" in opts["host"])
        server.set_app(StaticFilesHandler(get_internal_wsgi_application()))

        def stop(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(f"Airlock listening on http://{opts['host']}:{opts['port']}/", ending="\n")
        self.stdout.flush()
        try:
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            if scheduler:
                scheduler.stop()
            if worker:
                worker.stop(timeout=5000)
            try:
                from processing.sandbox import shutdown

                shutdown()
            except Exception:
                pass
        sys.exit(0)
