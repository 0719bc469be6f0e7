"""A stand-in for `trl vllm-serve` on loopback: answers GET /health as vLLM's server does, so the tests drive the
real start / health wait / stop path without vLLM or a GPU.

`python tests/vllm_standin.py MODE --host H --port P [--pid-file F]`. MODE: `ok` serves /health (and, like vLLM,
starts a worker process in its group, whose pid goes to --pid-file); `exit` prints a line and exits 3; `never`
prints a line and never listens; `stubborn` serves but ignores SIGTERM.
"""

import argparse
import http.server
import os
import signal
import subprocess
import sys
import time


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["ok", "exit", "never", "stubborn"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid-file")
    args = parser.parse_args()
    # the GPUs it was given, as vLLM would read them
    print(
        f"stand-in {args.mode} loading model on port {args.port} "
        f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})",
        flush=True,
    )
    if args.mode == "exit":
        print("CUDA out of memory (stand-in)", flush=True)
        sys.exit(3)
    if args.mode == "never":
        while True:
            time.sleep(1)
    if args.mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(str(worker.pid))
    server = http.server.ThreadingHTTPServer((args.host, args.port), Health)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
