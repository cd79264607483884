#!/usr/bin/env python3
"""A loopback HTTP server for the download tests: serves the files of a folder, with ranges,
and misbehaves on request, by the URL's first folder:

  /files/NAME      the file (206 for a Range request)
  /cut/NAME        the first request for NAME announces the whole size but sends half, then
                   closes; later ones are served as /files/ (an interrupted download)
  /alwayscut/NAME  every response sends half of what it announces
  /stall/NAME      sends the headers and 10 bytes, then nothing for 60 s
  /norange/NAME    ignores Range: always 200 and the whole file
  /norangestall/NAME  ignores Range; sends 1 KiB of the file, then nothing for 60 s
  /norangecut/NAME    ignores Range; announces the whole size, sends half, then closes
  anything else    404

Usage: asset_server.py DIR --port-file F [--log F]. Binds 127.0.0.1 on a free port and writes it
to F once it listens; --log gets one line per request: "<path> <Range header or ->".
"""
import argparse
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = "."
LOG = None
LOCK = threading.Lock()
SEEN = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        if LOG:
            with LOCK, open(LOG, "a") as f:
                f.write(f"{self.path} {rng or '-'}\n")
        parts = self.path.lstrip("/").split("/", 1)
        mode, name = (parts + [""])[:2]
        path = os.path.join(ROOT, name)
        if mode not in ("files", "cut", "alwayscut", "stall", "norange", "norangestall",
                        "norangecut") or not name or \
                ".." in name or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = open(path, "rb").read()
        start = 0
        if rng and not mode.startswith("norange") and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        with LOCK:
            first = name not in SEEN
            SEEN.add(name)
        if mode == "stall":
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(60)
            return
        if mode == "norangestall":
            self.wfile.write(body[:1024])
            self.wfile.flush()
            time.sleep(60)
            return
        if mode in ("alwayscut", "norangecut") or (mode == "cut" and first):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


def main():
    global ROOT, LOG
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    a = p.parse_args()
    ROOT, LOG = a.dir, a.log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
