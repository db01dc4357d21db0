"""The deployment files, checked offline: what can be known without a Kubernetes cluster, `helm` or `docker`.

- The instance Dagster's Helm chart renders from deploy/helm/values.yaml, and every local instance file, against
  Dagster's own config schema and the config schema of each class they name (dagster-postgres, dagster-k8s); the run
  queue and monitoring of the chart's instance against the local one's.
- The workspace the chart renders for the user-code deployment, and the repository's workspace files, as Dagster
  reads them.
- deploy/Dockerfile's build steps against the lock file and the Makefile: Python, uv, `--frozen`, nothing installed
  outside the lock, no data baked in, a non-root user.
- deploy/k8s/daskcluster.yaml against the Dask operator's DaskCluster CRD (shipped in the dask-kubernetes wheel), and
  the Kubernetes objects in the values against the Kubernetes client's models.

Not checked here: the values' keys against the chart's values.schema.json (it ships with the chart, in no PyPI
package), so `render_instance` below follows the chart's templates/helpers/instance/*.tpl for the keys these values
use; that the image builds; that the manifests apply to a cluster.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from llm_assets.platform import dagster_private as private
from llm_assets.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VALUES = DEPLOY / "helm" / "values.yaml"
DASK_CLUSTER = DEPLOY / "k8s" / "daskcluster.yaml"
K8S_SETTINGS = DEPLOY / "k8s" / "settings.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
RELEASE = "dagster"  # `helm upgrade --install dagster dagster/dagster` (the values file's header)


def _values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def _is_workspace(path: Path) -> bool:
    return "load_from" in (yaml.safe_load(path.read_text()) or {})


def local_instances() -> dict[str, dict[str, Any]]:
    """The local instances, by name: the embedded SQLite one (the top-level dagster.yaml) and the one `llm-assets
    deploy up` writes from it and deploy/dagster.postgres.yaml's storage."""
    from llm_assets.platform.deploy import instance_config
    from llm_assets.platform.instance import INSTANCE_YAML

    return {"dagster.yaml": yaml.safe_load(INSTANCE_YAML.read_text()),
            "llm-assets deploy": instance_config()}


def render_instance(values: dict[str, Any]) -> dict[str, Any]:
    """dagster.yaml as the chart's configmap-instance.yaml renders it from these values, for the keys they use.

    Follows the chart's templates (helpers/instance/_postgresql.tpl, _run-launcher.tpl, _run-coordinator.tpl and
    configmap-instance.yaml); a value this function does not know fails the test instead of being ignored."""
    pg = values["postgresql"]
    postgres = {"postgres_db": {
        "username": pg["postgresqlUsername"], "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": pg["postgresqlHost"], "db_name": pg["postgresqlDatabase"], "port": pg["service"]["port"],
        "params": pg.get("postgresqlParams", {})}}
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher", launcher["type"]
    k8s = dict(launcher["config"]["k8sRunLauncher"])
    known = {"imagePullPolicy", "loadInclusterConfig", "runK8sConfig", "failPodOnRunFailure", "envConfigMaps",
             "envSecrets", "volumes", "volumeMounts", "labels", "resources", "securityContext"}
    assert set(k8s) <= known, f"render_instance does not know {set(k8s) - known}"
    run_k8s = {re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), k): v
               for k, v in k8s.get("runK8sConfig", {}).items()}
    launcher_config = {
        "load_incluster_config": k8s["loadInclusterConfig"], "job_namespace": "llm-assets",
        "image_pull_policy": k8s["imagePullPolicy"], "service_account_name": values["global"]["serviceAccountName"],
        "dagster_home": "/opt/dagster/dagster_home", "instance_config_map": f"{RELEASE}-instance",
        "postgres_password_secret": values["global"]["postgresqlSecretName"],
        **({"env_config_maps": [m["name"] for m in k8s["envConfigMaps"]]} if k8s.get("envConfigMaps") else {}),
        **({"env_secrets": [s["name"] for s in k8s["envSecrets"]]} if k8s.get("envSecrets") else {}),
        **({"run_k8s_config": run_k8s} if run_k8s else {}),
        **({"fail_pod_on_run_failure": True} if k8s.get("failPodOnRunFailure") else {}),
        **{snake: k8s[camel] for camel, snake in (("volumes", "volumes"), ("volumeMounts", "volume_mounts"),
                                                  ("labels", "labels"), ("resources", "resources"),
                                                  ("securityContext", "security_context")) if k8s.get(camel)},
    }
    daemon = values["dagsterDaemon"]
    coordinator = daemon["runCoordinator"]
    assert coordinator["type"] == "CustomRunCoordinator", coordinator["type"]
    custom = coordinator["config"]["customRunCoordinator"]
    logs = values["computeLogManager"]
    assert logs["type"] == "S3ComputeLogManager", logs["type"]  # helpers/instance/_compute-log-manager.tpl
    s3_logs = dict(logs["config"]["s3ComputeLogManager"])
    known_logs = {"bucket": "bucket", "localDir": "local_dir", "prefix": "prefix", "useSsl": "use_ssl",
                  "verify": "verify", "verifyCertPath": "verify_cert_path", "endpointUrl": "endpoint_url",
                  "skipEmptyFiles": "skip_empty_files"}
    assert set(s3_logs) <= set(known_logs), f"render_instance does not know {set(s3_logs) - set(known_logs)}"
    monitoring = daemon["runMonitoring"]
    instance: dict[str, Any] = {
        "scheduler": {"module": "dagster._core.scheduler", "class": "DagsterDaemonScheduler"},
        "schedule_storage": {"module": "dagster_postgres.schedule_storage", "class": "PostgresScheduleStorage",
                             "config": postgres},
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": launcher_config},
        "run_storage": {"module": "dagster_postgres.run_storage", "class": "PostgresRunStorage", "config": postgres},
        "event_log_storage": {"module": "dagster_postgres.event_log", "class": "PostgresEventLogStorage",
                              "config": postgres},
        "run_coordinator": {"module": custom["module"], "class": custom["class"], "config": custom["config"]},
        "compute_logs": {"module": "dagster_aws.s3.compute_log_manager", "class": "S3ComputeLogManager",
                         "config": {known_logs[k]: v for k, v in s3_logs.items() if v}},
        "telemetry": {"enabled": values["telemetry"]["enabled"]},
    }
    if monitoring["enabled"]:
        instance["run_monitoring"] = {
            "enabled": True, "start_timeout_seconds": monitoring["startTimeoutSeconds"],
            "poll_interval_seconds": monitoring["pollIntervalSeconds"],
            **({"max_resume_run_attempts": monitoring["maxResumeRunAttempts"]}
               if monitoring.get("maxResumeRunAttempts") else {})}
    if daemon["runRetries"]["enabled"]:
        instance["run_retries"] = {"enabled": True, **({"max_retries": daemon["runRetries"]["maxRetries"]}
                                                       if daemon["runRetries"].get("maxRetries") else {})}
    concurrency = values.get("concurrency") or {}  # helpers/instance/_concurrency.tpl
    pools, runs = concurrency.get("pools") or {}, concurrency.get("runs") or {}
    names = {"defaultLimit": "default_limit", "granularity": "granularity",
             "opGranularityRunBuffer": "op_granularity_run_buffer", "maxConcurrentRuns": "max_concurrent_runs",
             "tagConcurrencyLimits": "tag_concurrency_limits"}
    assert set(pools) | set(runs) <= set(names), f"render_instance does not know {set(pools) | set(runs) - set(names)}"
    rendered = {section: {names[k]: v for k, v in given.items()} for section, given in (("pools", pools),
                                                                                      ("runs", runs)) if given}
    if rendered:
        instance["concurrency"] = rendered
    if daemon["sensors"].get("useThreads"):
        instance["sensors"] = {"use_threads": True, "num_workers": daemon["sensors"]["numWorkers"]}
    return instance


def check_instance(config: dict[str, Any], tmp_path: Path) -> None:
    """Dagster's own check of an instance file (its schema), then each named class's config against that class's."""
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    private.dagster_instance_config(str(tmp_path))  # raises DagsterInvalidConfigError, listing every error
    for key, entry in config.items():
        if not (isinstance(entry, dict) and "module" in entry):
            continue
        # The module as Dagster resolves it (`dagster.core.*` is read as `dagster._core.*`).
        module = private.ConfigurableClassData(entry["module"], entry["class"], "{}").module_name
        cls = getattr(importlib.import_module(module), entry["class"])
        if hasattr(cls, "config_type"):
            result = private.validate_config(cls.config_type(), entry.get("config") or {})
            assert result.success, f"{key} ({entry['class']}): {[e.message for e in result.errors]}"


def test_the_chart_instance_passes_dagsters_schema_and_its_classes_schemas(tmp_path):
    instance = render_instance(_values())
    check_instance(instance, tmp_path)
    # The run pods' Kubernetes config is free-form for Dagster's schema: dagster-k8s reads it with the Kubernetes
    # client's models at launch, and so does this test (an unknown or misspelt key raises).
    from dagster_k8s.job import UserDefinedDagsterK8sConfig
    UserDefinedDagsterK8sConfig(**instance["run_launcher"]["config"]["run_k8s_config"])


@pytest.mark.parametrize("name", local_instances())
def test_each_local_instance_passes_dagsters_schema(name, tmp_path):
    check_instance(local_instances()[name], tmp_path)


def test_a_wrong_key_fails_the_instance_check(tmp_path):
    """The check can fail: a misspelt key at the top, and one inside a class's config."""
    instance = render_instance(_values())
    with pytest.raises(Exception, match="run_monitoringg"):
        check_instance({**instance, "run_monitoringg": {}}, tmp_path)
    instance["run_launcher"]["config"]["fail_pod_on_run_failur"] = True
    with pytest.raises(AssertionError, match="fail_pod_on_run_failur"):
        check_instance(instance, tmp_path)


def _run_queue(instance: dict[str, Any]) -> dict[str, Any]:
    """The run queue's settings, wherever the instance file puts them."""
    return {**((instance.get("run_coordinator") or {}).get("config") or {}), **(instance.get("run_queue") or {}),
            **((instance.get("concurrency") or {}).get("runs") or {})}


def test_the_chart_queue_mirrors_the_local_one_and_fills_the_cluster():
    """The same rules as the local instance (its sizes aside: runs at once, pool limits); a rule added to one and not
    the other fails here."""
    chart = render_instance(_values())
    queue = _run_queue(chart)
    for name, local in local_instances().items():
        local_queue = _run_queue(local)
        for key in ("tag_concurrency_limits", "max_user_code_failure_retries", "user_code_failure_retry_delay"):
            assert queue.get(key) == local_queue.get(key), (
                f"{key}: chart {queue.get(key)}, {name} {local_queue.get(key)}")
        monitoring, local_monitoring = chart.get("run_monitoring", {}), local.get("run_monitoring", {})
        assert monitoring.get("enabled") == local_monitoring.get("enabled")
        assert monitoring.get("max_resume_run_attempts", 0) == local_monitoring.get("max_resume_run_attempts", 0)
        retries, local_retries = chart.get("run_retries", {}), local.get("run_retries", {})
        assert retries.get("enabled", False) == local_retries.get("enabled", False)
        assert retries.get("max_retries", 0) == local_retries.get("max_retries", 0)
        pools = (chart.get("concurrency") or {}).get("pools")
        local_pools = (local.get("concurrency") or {}).get("pools")
        assert bool(pools) == bool(local_pools), f"pools: chart {pools}, {name} {local_pools}"
        if pools:
            assert pools.get("granularity") == local_pools.get("granularity")
    # Concurrent runs × units in flight per run cover every worker thread of the Dask cluster.
    settings = Settings.from_file(K8S_SETTINGS)
    worker = _dask_cluster()["spec"]["worker"]
    args = worker["spec"]["containers"][0]["args"]
    threads = worker["replicas"] * int(args[args.index("--nthreads") + 1])
    assert queue["max_concurrent_runs"] * settings.runner.max_in_flight >= threads


def _chart_workspace(values: dict[str, Any]) -> dict[str, Any]:
    """workspace.yaml as the chart's configmap-workspace.yaml renders it for its user-code deployments."""
    return {"load_from": [{"grpc_server": {"host": d["name"], "port": d["port"], "location_name": d["name"]}}
                          for d in values["dagster-user-deployments"]["deployments"]]}


def test_the_workspaces_load(tmp_path, monkeypatch):
    # the repository's workspace.yaml reads the code server's address from these, as `deploy up` and `ui` set them
    monkeypatch.setenv("LLM_ASSETS_CODE_SERVER_HOST", "127.0.0.1")
    monkeypatch.setenv("LLM_ASSETS_CODE_SERVER_PORT", "4266")
    chart = tmp_path / "workspace.yaml"
    chart.write_text(yaml.safe_dump(_chart_workspace(_values())))
    (origin,) = private.location_origins_from_yaml_paths([str(chart)])
    assert (origin.location_name, origin.port) == ("llm-assets", 3030)
    repo_files = [p for p in [*ROOT.glob("*.yaml"), *sorted(DEPLOY.glob("*.yaml"))] if _is_workspace(p)]
    for path in repo_files:
        origins = private.location_origins_from_yaml_paths([str(path)])
        assert origins, path
        for o in origins:  # a Python-module entry names a module that is there
            try:
                module = o.loadable_target_origin.module_name
            except dg.DagsterInvariantViolationError:  # a gRPC server's entry: the server loads the module
                module = None
            assert module is None or importlib.util.find_spec(module), (path, module)


def test_the_code_server_serves_the_projects_code_location():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module = pyproject["tool"]["dagster"]["module_name"]
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]
    args = deployment["codeServerArgs"]
    assert args[args.index("--module-name") + 1] == module
    assert importlib.util.find_spec(module)
    cmd = _final_stage(_dockerfile())["CMD"]
    assert cmd[:3] == ["dagster", "code-server", "start"] and cmd[cmd.index("-m") + 1] == module


# --- the Dockerfile against the lock file --------------------------------------------------------------------------

def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of each instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines()
                                          if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def _args(steps: list[tuple[str, str]]) -> dict[str, str]:
    return dict(a.split("=", 1) for op, a in steps if op == "ARG" and "=" in a)


def _expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group()), text)


def _final_stage(steps: list[tuple[str, str]]) -> dict[str, Any]:
    last = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    stage = steps[last:]
    cmd = [a for op, a in stage if op == "CMD"]
    return {"USER": [a for op, a in stage if op == "USER"], "CMD": yaml.safe_load(cmd[-1]) if cmd else None,
            "COPY": [a for op, a in stage if op == "COPY"]}


def _lock() -> dict[str, Any]:
    return tomllib.loads((ROOT / "uv.lock").read_text())


def _locked_closure(groups: list[str]) -> set[str]:
    """Every package `uv sync --frozen --no-default-groups --group G...` installs, from uv.lock."""
    packages = {p["name"]: p for p in _lock()["package"]}
    root = packages["llm-assets"]
    todo = [d["name"] for d in root.get("dependencies", [])]
    for group in groups:
        todo += [d["name"] for d in root.get("dev-dependencies", {})[group]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [d["name"] for d in packages[name].get("dependencies", [])]
    return seen


def test_the_dockerfile_builds_from_the_lock_file_alone():
    steps = _dockerfile()
    args = _args(steps)
    # Python: the image's interpreter is the one the lock file was resolved for.
    bases = {_expand(a.split()[0], args) for op, a in steps if op == "FROM"} - {"build"}
    (base,) = bases
    minor = re.match(r"python:(\d+\.\d+)", base)
    assert minor, base
    assert _lock()["requires-python"] == f"=={minor.group(1)}.*"
    # uv: the version the Makefile installs.
    pinned = re.search(r'"uv==([^"]+)"', (ROOT / "Makefile").read_text()).group(1)
    assert args["UV_VERSION"] == pinned
    runs = [_expand(a, args) for op, a in steps if op == "RUN"]
    installs = [r for r in runs if re.search(r"\b(pip|uv pip|uv add|uv lock|apt-get install|conda)\b", r)]
    assert installs == [f'python -m pip install --no-cache-dir "uv=={pinned}"'], installs
    syncs = [shlex.split(r) for r in runs if "uv sync" in r]
    assert syncs, "no uv sync"
    groups: set[str] = set()
    for sync in syncs:
        assert "--frozen" in sync and "--no-default-groups" in sync, sync  # the lock as it is, no dev tools
        groups |= {sync[i + 1] for i, a in enumerate(sync) if a == "--group"}
    assert "ENV" in {op for op, _ in steps} and any("UV_COMPILE_BYTECODE=1" in a for op, a in steps if op == "ENV")
    assert any("UV_PYTHON_DOWNLOADS=never" in a for op, a in steps if op == "ENV")
    # What the image installs holds what the chart's instance imports, and none of the dev group.
    image = _locked_closure(sorted(groups))
    instance = render_instance(_values())
    for entry in instance.values():
        if isinstance(entry, dict) and "module" in entry:
            top = entry["module"].split(".")[0].replace("_", "-")
            assert top in image or top == "dagster", f"the image lacks {top} (instance: {entry['module']})"
    for dev_only in ("pytest", "ruff", "mypy", "datatrove"):
        assert dev_only not in image
    # Only the project's metadata and packages are copied: no model, data or local state.
    hatch = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    copies = [a.split() for op, a in steps if op == "COPY" and "--from=" not in a]
    copied = [src for c in copies for src in c[:-1]]
    assert sorted(copied) == sorted(["pyproject.toml", "uv.lock", *hatch["packages"]]), copied
    assert all((ROOT / src).exists() for src in copied)
    # The project's packages are imported from PYTHONPATH, compiled like the environment.
    env = " ".join(a for op, a in steps if op == "ENV")
    (pythonpath,) = re.findall(r"PYTHONPATH=(\S+)", env)
    workdir = [a for op, a in steps if op == "WORKDIR"][0]
    for package in hatch["packages"]:
        (dest,) = [c[-1] for c in copies if c[0] == package]
        assert str((Path(workdir) / dest).resolve()) == f"{pythonpath}/{package}", dest
    assert any(f"compileall -q {pythonpath}" in r for r in runs)
    ignore = [line for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*" and not any("shared" in line or ".venv" in line for line in ignore if line.startswith("!"))
    # The final stage runs as a user of its own.
    (user,) = _final_stage(steps)["USER"]
    assert user.split(":")[0] not in ("0", "root")


def test_the_dockerfile_check_can_fail(monkeypatch, tmp_path):
    """A sync without --frozen, or a package installed beside the lock, is caught."""
    original = DOCKERFILE.read_text()
    for broken in (original.replace("--frozen --no-default-groups --group deploy --no-install-project",
                                    "--no-default-groups --group deploy --no-install-project"),
                   original.replace("COPY llm_assets", "RUN python -m pip install requests\nCOPY llm_assets")):
        assert broken != original
        (tmp_path / "Dockerfile").write_text(broken)
        monkeypatch.setattr(sys.modules[__name__], "DOCKERFILE", tmp_path / "Dockerfile")
        with pytest.raises(AssertionError):
            test_the_dockerfile_builds_from_the_lock_file_alone()


# --- Kubernetes objects ---------------------------------------------------------------------------------------------

def _dask_cluster() -> dict[str, Any]:
    (cluster,) = [d for d in yaml.safe_load_all(DASK_CLUSTER.read_text()) if d["kind"] == "DaskCluster"]
    return cluster


def _crd_schema() -> dict[str, Any]:
    import dask_kubernetes
    crd = (Path(dask_kubernetes.__file__).parent / "operator" / "deployment" / "helm" / "dask-kubernetes-operator"
           / "crds" / "daskcluster.yaml")
    (version,) = [v for v in yaml.safe_load(crd.read_text())["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def _unknown_keys(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys the schema does not define (kubectl's strict validation): Kubernetes would drop them silently."""
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") or "properties" not in schema:
            return []
        props = schema["properties"]
        return [f"{path}.{k}" for k in obj if k not in props] + [
            u for k, v in obj.items() if k in props for u in _unknown_keys(v, props[k], f"{path}.{k}")]
    if isinstance(obj, list) and "items" in schema:
        return [u for i, v in enumerate(obj) for u in _unknown_keys(v, schema["items"], f"{path}[{i}]")]
    return []


def test_the_dask_cluster_matches_the_operators_crd():
    import jsonschema
    schema = _crd_schema()
    cluster = _dask_cluster()
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    jsonschema.validate(cluster, schema)
    spec = schema["properties"]["spec"]  # apiVersion, kind and metadata are every object's, not the CRD's
    assert _unknown_keys(cluster["spec"], spec, ".spec") == []
    broken = yaml.safe_load(yaml.safe_dump(cluster["spec"]))
    broken["worker"]["spec"]["containers"][0]["resourcez"] = {}
    assert _unknown_keys(broken, spec, ".spec") == [".spec.worker.spec.containers[0].resourcez"]


def test_the_cluster_runs_the_code_image_and_is_what_the_settings_name():
    values = _values()
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    image = f"{deployment['image']['repository']}:{deployment['image']['tag']}"
    cluster = _dask_cluster()
    containers = [*cluster["spec"]["scheduler"]["spec"]["containers"], *cluster["spec"]["worker"]["spec"]["containers"]]
    assert {c["image"] for c in containers} == {image}  # units are this code, shipped by reference
    settings = Settings.from_file(K8S_SETTINGS)
    assert settings.runner.kind == "dask"
    port = next(p["port"] for p in cluster["spec"]["scheduler"]["service"]["ports"] if p["name"] == "tcp-comm")
    assert settings.runner.address == f"tcp://{cluster['metadata']['name']}-scheduler:{port}"
    # Workers take the store's credentials from the same Secret as the code server and run pods, and mount the
    # tokenizer the settings name; nothing is read from ../shared.
    (worker,) = cluster["spec"]["worker"]["spec"]["containers"]
    assert {e["secretRef"]["name"] for e in worker["envFrom"] if "secretRef" in e} == {
        s["name"] for s in deployment["envSecrets"]}
    tokenizer = settings.tokenized.tokenizer_path
    assert tokenizer.is_absolute() and "shared" not in tokenizer.parts
    assert any(tokenizer.is_relative_to(m["mountPath"]) for m in worker["volumeMounts"])
    assert any(tokenizer.is_relative_to(m["mountPath"]) for m in deployment["volumeMounts"])


def test_the_user_deployments_kubernetes_fields_are_kubernetes_objects():
    import kubernetes
    from dagster_k8s.models import k8s_snake_case_dict
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]
    client = kubernetes.client
    for volume in deployment["volumes"]:
        k8s_snake_case_dict(client.V1Volume, volume)
    for mount in deployment["volumeMounts"]:
        k8s_snake_case_dict(client.V1VolumeMount, mount)
    k8s_snake_case_dict(client.V1PodSecurityContext, deployment["podSecurityContext"])
    k8s_snake_case_dict(client.V1SecurityContext, deployment["securityContext"])
    k8s_snake_case_dict(client.V1ResourceRequirements, deployment["resources"])


def test_no_secret_value_is_in_the_deployment_files():
    """Secrets are referenced by name: no password, key or token value in deploy/ (an `{env: NAME}` reference, as
    dagster.postgres.yaml's password, names the variable that holds it)."""
    values = _values()
    assert "postgresqlPassword" not in values["postgresql"] and values["generatePostgresqlPasswordSecret"] is False
    for path in [*DEPLOY.rglob("*"), ROOT / "dagster.yaml"]:
        if path.is_file():
            text = path.read_text()
            assert not re.search(r"(?i)(AWS_SECRET_ACCESS_KEY|password|token)\s*[:=]\s*(?!\{\s*env:)\S", text), path


def test_the_other_manifests_are_kubernetes_objects():
    """Built-in kinds beside the DaskCluster (its NetworkPolicy), read strictly with the Kubernetes client's models."""
    import kubernetes
    from dagster_k8s.models import k8s_snake_case_dict
    others = [d for d in yaml.safe_load_all(DASK_CLUSTER.read_text()) if d["kind"] != "DaskCluster"]
    assert [d["kind"] for d in others] == ["NetworkPolicy"]
    for doc in others:
        model = getattr(kubernetes.client, f"V1{doc['kind']}")
        k8s_snake_case_dict(model, doc)
        with pytest.raises(Exception, match="Unexpected keys"):
            k8s_snake_case_dict(model, {**doc, "spec": {**doc["spec"], "podSelectr": {}}})


def test_the_runs_logs_go_to_the_lakes_bucket_where_the_webserver_reads_them():
    """dagster-aws's S3ComputeLogManager: written by the run pods (which get the user deployment's environment:
    the chart's includeConfigInLaunchedRuns, on unless turned off), read by the webserver with a key of its own; both
    get the bucket and endpoint's ConfigMap (names only: no value is in the file)."""
    values = _values()
    logs = render_instance(values)["compute_logs"]["config"]
    assert logs["bucket"] == {"env": "LLM_ASSETS_BUCKET"} and logs["endpoint_url"] == {"env": "LLM_ASSETS_S3_ENDPOINT"}
    (code,) = values["dagster-user-deployments"]["deployments"]
    assert code.get("includeConfigInLaunchedRuns", {"enabled": True})["enabled"]
    assert {"name": "llm-assets-env"} in code["envConfigMaps"] and {"name": "llm-assets-s3"} in code["envSecrets"]
    web = values["dagsterWebserver"]  # a read-only key for the logs' prefix, never the lake's
    assert {"name": "llm-assets-env"} in web["envConfigMaps"] and web["envSecrets"] == [{"name": "llm-assets-logs-s3"}]
