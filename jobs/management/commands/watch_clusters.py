"""`manage.py watch_clusters`: keep job status live and catch drift of owned objects, by watching every cluster."""

import faulthandler
import logging
import signal
import threading

from django.core.management.base import BaseCommand

from jobs import watch


class Command(BaseCommand):
    help = ("Watch every active cluster (one active watcher per cluster across replicas, by a lease): job status "
            "reaches the database within a second, and an owned object edited or deleted by hand nudges reconcile. "
            "Runs until SIGINT or SIGTERM.")

    def add_arguments(self, parser):
        parser.add_argument("--heartbeat", metavar="PATH", help="a file touched by the main loop (liveness probes)")

    def handle(self, *args, **options):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` prints every thread's stack
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        import kubernetes.client  # noqa: F401 - loaded before the lease is sought, so a standby takes over at once

        self.stdout.write("watching clusters", ending="\n")
        self.stdout.flush()
        watch.run(stop, heartbeat=options["heartbeat"])
