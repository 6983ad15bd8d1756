"""``python -m s3wq.dev.vlm_standin``: the stand-in in a process of its own, until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from s3wq.processors.vlm.settings import DEFAULT_LONGEST_SIDE, DEFAULT_MODEL

from .server import StandIn

EXAMPLE = """\
example:
  python -m s3wq.dev.vlm_standin --port 8000 --latency 0.5 --max-in-flight 4
  S3WQ_VLM_ENDPOINT=http://127.0.0.1:8000/v1 s3wq work ...   # pages answered with stand-in text

It is no model: the text of its answers is made up. Script it from another shell:
  curl -d '{"steps": ["rotated", {"behaviour": "status", "status": 503, "retry_after": 1}]}' \\
       http://127.0.0.1:8000/_standin/script
(a bare name for behaviours without a parameter; status, slow (seconds) and rotated (rotation) take one), and read
what it was sent with GET /_standin/requests.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m s3wq.dev.vlm_standin",
        description="A stand-in for olmocr's vision-language model: an OpenAI-compatible server that checks every "
        "request against what olmocr sends and answers in olmocr's format. Not a model.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one, printed)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"the model name requests must give (default {DEFAULT_MODEL})")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each answer takes, as on a GPU (default 0)")
    parser.add_argument("--max-in-flight", type=int, default=None, help="answers in progress at once; the rest wait (default: no cap)")
    parser.add_argument(
        "--longest-side", type=int, default=DEFAULT_LONGEST_SIDE, help=f"pixels of a page's longest side (default {DEFAULT_LONGEST_SIDE})"
    )
    parser.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        standin = StandIn(
            model=options.model,
            host=options.host,
            port=options.port,
            latency=options.latency,
            max_in_flight=options.max_in_flight,
            longest_side=options.longest_side,
            api_key=options.api_key,
        )
    except (OSError, ValueError) as exc:
        print(f"vlm stand-in: cannot start on {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C too: a stand-in started from a script may ignore it otherwise
        signal.signal(signum, lambda *_: stop.set())
    with standin:
        print(f"vlm stand-in (not a model: its answers are made up) serving {standin.model!r} at {standin.url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
