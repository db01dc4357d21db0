"""The services a person starts by hand: the embedded object store, the local cluster, the UI, the deployment, and
the effective settings."""

from __future__ import annotations

import json
import os
import signal
import sys

from llm_assets.platform import environment


class StoreNotAnswering(RuntimeError):
    pass


def _store():
    from llm_assets.platform.embedded_store import home_store  # boto3: only for the commands that manage the store

    return home_store()


def cmd_store(args) -> int:
    if not environment.uses_embedded_store():
        print(f"LLM_ASSETS_S3_ENDPOINT points at {environment.endpoint() or 'AWS S3'}: no embedded store to manage")
        return 0 if args.action == "status" else 1
    store = _store()
    if args.action == "start":
        store.start()
        print(f"object store running at {store.endpoint} (bucket {store.bucket}, state {store.state_dir}; ports "
              f"recorded in {environment.ports_file()})")
    elif args.action == "stop":
        print("object store stopped" if store.stop() else "object store was not running")
    else:
        status = store.status()
        print(json.dumps(status) if args.json else
              f"{'running' if status['running'] else 'stopped'}: {status['endpoint']} bucket={status['bucket']}")
        return 0 if status["running"] else 3
    return 0


def cmd_cluster(args) -> int:
    """The local Dask cluster the `dask` runner uses when no runner.address is set."""
    from llm_assets.platform.runners import local_cluster

    cluster = local_cluster()
    if args.action == "start":
        # No credentials are handed to the workers: each unit names where its process reads them.
        state = cluster.start(nodes=args.nodes, dashboard=args.dashboard)
        print(f"cluster running at {state.address}: scheduler and {len(state.workers)} workers "
              f"(state and logs in {cluster.state_dir})"
              + (f"; dashboard {state.dashboard}" if state.dashboard else ""))
    elif args.action == "stop":
        print("cluster stopped" if cluster.stop() else "no cluster was running")
    else:
        status = cluster.status()
        if args.json:
            print(json.dumps(status))
        elif status["running"]:
            print(f"running: {status['address']}, workers {', '.join(status['workers']) or 'none'}")
        else:
            print("stopped" + (f": {status['error']}" if "error" in status else ""))
        return 0 if status["running"] else 3
    return 0


def ensure_store() -> None:
    """The embedded store, started if need be; in a deployed home (`deploy up` runs), never started here: its
    supervisor owns it, and a second store beside it would move its ports and fight over its data folder."""
    if not environment.uses_embedded_store():
        return
    from llm_assets.platform.deploy import Layout

    store = _store()
    if Layout(environment.home()).supervisor_pid() is None:
        store.start()
    elif not store.ready():
        raise StoreNotAnswering(
            f"the deployment's object store does not answer: {store.why_not_answering()}. `llm-assets deploy up` "
            "supervises it and restarts it when it exits (`llm-assets deploy status` shows it); this command starts "
            "no store of its own in a deployed home")


def cmd_ui(args) -> int:
    """Dagster's webserver, daemon and code server on this home's instance, as separate supervised processes reading
    workspace.yaml (what `deploy up` runs, without PostgreSQL); Ctrl-C stops them."""
    import threading

    from llm_assets.platform import deploy
    from llm_assets.platform.instance import dagster_home

    layout = deploy.Layout(environment.home())
    if layout.supervisor_pid() is not None:
        print("`llm-assets deploy up` runs on this home: its UI is the one `llm-assets deploy status` names")
        return deploy.print_status(environment.home())
    ensure_store()
    home = dagster_home()
    code_port = deploy.free_port()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    services = deploy.dagster_services(code_port, args.port, webserver_host=args.host)
    supervisor = deploy.Supervisor(environment.home() / "ui", services,
                                   {**os.environ, **deploy.dagster_env(home, code_port)})
    try:
        print(f"starting the code server (port {code_port}), the daemon and the webserver; logs in "
              f"{supervisor.logs}", flush=True)
        supervisor.start()
        print(f"UI: http://{args.host}:{args.port} (instance {home}); Ctrl-C stops it", flush=True)
        stop.wait()
    finally:
        supervisor.stop()
    return 0


def cmd_deploy(args) -> int:
    from llm_assets.platform import deploy

    home = environment.home()
    if args.action == "up":
        return deploy.up(home, nodes=args.nodes, webserver_port=args.port)
    if args.action == "down":
        return deploy.down(home)
    return deploy.print_status(home, as_json=args.json)


def cmd_settings(args) -> int:
    import yaml

    if args.reference:
        from llm_assets.settings_reference import render

        sys.stdout.write(render())
        return 0
    print(f"# {args.settings_path}")
    sys.stdout.write(yaml.safe_dump(args.settings.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
    return 0
