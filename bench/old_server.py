"""The old :5002 server's behaviour, reproduced for bench/bench_vs_old_server.py: no sandbox at all.

    <venv>/bin/python bench/old_server.py --port PORT

A Flask dev server (threaded) whose ``POST /execute`` writes the code to a temp file and runs it
with ``subprocess.run(["python", path], ...)``: whatever ``python`` the PATH names (the bench puts
a venv holding only flask first, as an activated venv would). Kept apart from boxed on purpose:
it imports only flask and the stdlib, so it measures the old way and nothing of ours.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile

from flask import Flask, jsonify, request

app = Flask(__name__)


@app.route("/execute", methods=["POST"])
def execute():  # noqa: ANN201 - a Flask view, as the old server wrote it
    data = request.get_json(force=True, silent=True) or {}
    code = data.get("code", "")
    if not code:
        return jsonify({"error": "No code provided"}), 400
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(code)
            path = f.name
        try:
            result = subprocess.run(
                ["python", path],
                input=data.get("input", ""),
                capture_output=True,
                text=True,
                timeout=5,
            )
        finally:
            os.unlink(path)
        return jsonify({"output": result.stdout, "error": result.stderr})
    except Exception as exc:  # the old server answered 200 with the message
        return jsonify({"error": str(exc)})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=5002)
    app.run(host="127.0.0.1", port=parser.parse_args().port, threaded=True)
