"""``python -m exec_server.ray deploy|status|reconcile|stop --address ADDRESS``: boxed on every
node of a running Ray cluster, from any machine that can join it as a driver (docs/ray.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys


def _env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("BOXED_"):
            raise SystemExit(f"--env takes BOXED_NAME=value, not {pair!r}")
        env[name] = value
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exec_server.ray", description=__doc__)
    parser.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS", "auto"),
        help="the Ray cluster's address (default: $RAY_ADDRESS, else the one on this machine)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    deploy = sub.add_parser("deploy", help="start boxed on every alive node (idempotent)")
    deploy.add_argument("--port", type=int, default=5002, help="every node's port (5002)")
    deploy.add_argument(
        "--env", action="append", default=[], metavar="BOXED_NAME=value", help="a setting"
    )
    deploy.add_argument(
        "--num-cpus", type=float, default=0, help="CPUs each actor reserves in Ray (0)"
    )
    deploy.add_argument("--no-wait", action="store_true", help="do not wait for /readyz")
    sub.add_parser("status", help="per node: url, pid, instance, ready")
    sub.add_parser("reconcile", help="start boxed on nodes that joined, forget dead ones")
    sub.add_parser("stop", help="stop every service and remove its containers")
    args = parser.parse_args(argv)

    import ray

    import exec_server.ray as boxed_ray

    ray.init(address=args.address, namespace=boxed_ray.NAMESPACE, log_to_driver=False)
    if args.command == "deploy":
        out: object = boxed_ray.deploy(
            port=args.port, env=_env(args.env), num_cpus=args.num_cpus, wait=not args.no_wait
        )
    elif args.command == "status":
        out = boxed_ray.status()
    elif args.command == "reconcile":
        out = boxed_ray.reconcile()
    else:
        out = {"stopped": boxed_ray.shutdown()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
