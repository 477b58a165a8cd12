"""The deployment files are checked by reading them (no Docker or Kubernetes here): every name a
manifest references exists, every setting it sets is one the code reads, the probes hit `/healthz`,
there is one beat, and `/healthz` itself reports the database and Redis."""
import io
import json
import re
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "platform" / "k8s"


def _documents() -> list[dict]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _by_kind(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in _documents() if d["kind"] == kind}


def _pod_specs() -> dict[str, dict]:
    workloads = {**_by_kind("Deployment"), **_by_kind("Job")}
    return {name: w["spec"]["template"]["spec"] for name, w in workloads.items()}


def _env_names_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in [*(ROOT / "config").rglob("*.py"), ROOT / "platform" / "gunicorn.conf.py"]:
        text = path.read_text()
        names |= set(re.findall(r"env_(?:str|bool|int|list)\(\s*\"([A-Z0-9_]+)\"", text))
        names |= set(re.findall(r"environ(?:\.get)?[\[(]\s*\"([A-Z0-9_]+)\"", text))
        names |= set(re.findall(r"key_from_env_or_file\(\s*\"([A-Z0-9_]+)\"", text))
    return names


def test_the_platform_has_every_piece_the_deployment_needs():
    kinds = {(d["kind"], d["metadata"]["name"]) for d in _documents()}

    assert {("Deployment", "rubrica-web"), ("Deployment", "rubrica-worker"), ("Deployment", "rubrica-beat"),
            ("Job", "rubrica-migrate"), ("ConfigMap", "rubrica-config"), ("Secret", "rubrica-secrets"),
            ("Service", "rubrica-web"), ("HorizontalPodAutoscaler", "rubrica-web"),
            ("HorizontalPodAutoscaler", "rubrica-worker")} <= kinds


def test_every_config_map_and_secret_a_pod_reads_exists_and_every_key_is_a_setting_the_code_reads():
    config_maps, secrets = _by_kind("ConfigMap"), _by_kind("Secret")
    read = _env_names_read_by_the_code()

    for name, spec in _pod_specs().items():
        for container in spec["containers"]:
            refs = container.get("envFrom", [])
            assert refs, f"{name} reads no settings"
            for ref in refs:
                if "configMapRef" in ref:
                    assert ref["configMapRef"]["name"] in config_maps, name
                if "secretRef" in ref:
                    assert ref["secretRef"]["name"] in secrets, name
    keys = {k for cm in config_maps.values() for k in cm["data"]} | \
        {k for s in secrets.values() for k in s["stringData"]}
    assert keys - read == set(), f"set but never read: {sorted(keys - read)}"
    assert {"SECRET_KEY", "RUBRICA_SECRETS_KEY", "DATABASE_URL", "REDIS_URL"} <= keys


def _megabytes(size: str) -> float:
    """An nginx size ("501m", "1g", "1048576") in MiB."""
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.lower()).groups()
    return int(number) * {"": 2**-20, "k": 2**-10, "m": 1, "g": 1024}[unit]


def test_the_ingress_lets_an_import_as_large_as_the_cap_through_to_the_web_service():
    from django.conf import settings

    from core.input_guard import IMPORT_FORM_OVERHEAD

    ingress = _by_kind("Ingress")["rubrica-web"]
    annotations = ingress["metadata"]["annotations"]
    cap = int(_by_kind("ConfigMap")["rubrica-config"]["data"]["RUBRICA_MAX_IMPORT_BYTES"])
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    service = _by_kind("Service")[backend["name"]]

    assert cap == settings.RUBRICA_MAX_IMPORT_BYTES  # the manifest says what the default is
    body_limit = _megabytes(annotations["nginx.ingress.kubernetes.io/proxy-body-size"])
    assert (cap + IMPORT_FORM_OVERHEAD) / 2**20 <= body_limit < cap / 2**20 + 16
    assert annotations["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "off"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 120
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_web_probes_hit_healthz_on_the_served_port_with_an_allowed_host():
    web = _by_kind("Deployment")["rubrica-web"]
    container = web["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    allowed = _by_kind("ConfigMap")["rubrica-config"]["data"]["ALLOWED_HOSTS"].split(",")

    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] in ports
        host = {h["name"]: h["value"] for h in get["httpHeaders"]}["Host"]
        assert host in allowed
    assert ports["http"] == 8000  # gunicorn.conf.py binds 0.0.0.0:8000
    assert "0.0.0.0:8000" in (ROOT / "platform" / "gunicorn.conf.py").read_text()


def test_the_worker_has_probes_and_the_service_and_autoscalers_point_at_what_exists():
    deployments = _by_kind("Deployment")
    worker = deployments["rubrica-worker"]["spec"]["template"]["spec"]["containers"][0]
    service = _by_kind("Service")["rubrica-web"]

    assert "readinessProbe" in worker and "livenessProbe" in worker
    web_labels = deployments["rubrica-web"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= web_labels.items()
    web_ports = {p["name"] for p in deployments["rubrica-web"]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert all(p["targetPort"] in web_ports for p in service["spec"]["ports"])
    for name, hpa in _by_kind("HorizontalPodAutoscaler").items():
        target = hpa["spec"]["scaleTargetRef"]
        assert target["kind"] == "Deployment" and target["name"] in deployments, name
        assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        assert target["name"] != "rubrica-beat"
    for name, deployment in deployments.items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items(), name


def test_there_is_exactly_one_beat_and_it_never_overlaps_itself():
    beat = _by_kind("Deployment")["rubrica-beat"]

    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert beat["spec"]["template"]["spec"]["containers"][0]["command"][:4] == ["celery", "-A", "config", "beat"]


def test_the_migration_job_migrates_and_every_pod_runs_the_same_image():
    job = _by_kind("Job")["rubrica-migrate"]["spec"]["template"]["spec"]
    images = {c["image"] for spec in _pod_specs().values() for c in spec["containers"]}

    assert job["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert job["restartPolicy"] == "Never"
    assert len(images) == 1


def test_web_pods_log_json_share_metrics_across_workers_and_are_scraped_with_the_token():
    web = _by_kind("Deployment")["rubrica-web"]["spec"]["template"]
    container = web["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    volumes = {v["name"]: v for v in web["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}

    assert _by_kind("ConfigMap")["rubrica-config"]["data"]["RUBRICA_LOG_FORMAT"] == "json"
    assert "emptyDir" in volumes[mounts[env["PROMETHEUS_MULTIPROC_DIR"]]]
    assert "PROMETHEUS_MULTIPROC_DIR" in (ROOT / "platform" / "gunicorn.conf.py").read_text()
    assert web["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert "RUBRICA_METRICS_TOKEN" in _by_kind("Secret")["rubrica-secrets"]["stringData"]


@pytest.mark.django_db
def test_healthz_reports_the_database_and_redis(client, settings):
    ok = client.get("/healthz")

    assert ok.status_code == 200
    body = ok.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert body["redis"] in ("ok", "not configured")


@pytest.mark.django_db
def test_healthz_answers_503_naming_a_redis_it_cannot_reach(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # the discard port: nothing listens

    failing = client.get("/healthz")

    assert failing.status_code == 503
    assert failing.json()["redis"].startswith("failed: ") and failing.json()["database"] == "ok"


def test_the_worker_is_ready_only_when_the_database_redis_and_its_broker_answer():
    worker = _by_kind("Deployment")["rubrica-worker"]["spec"]["template"]["spec"]["containers"][0]
    ready = " ".join(worker["readinessProbe"]["exec"]["command"])
    alive = " ".join(worker["livenessProbe"]["exec"]["command"])

    assert "python manage.py healthcheck &&" in ready and "inspect ping -d celery@$HOSTNAME" in ready
    assert "inspect ping -d celery@$HOSTNAME" in alive


@pytest.mark.django_db
def test_the_healthcheck_command_passes_with_the_database_and_redis_and_fails_naming_what_is_down(settings):
    out = io.StringIO()
    call_command("healthcheck", stdout=out)
    assert json.loads(out.getvalue())["database"] == "ok"

    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # the discard port: nothing listens
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("healthcheck", stdout=out)
    assert exit_.value.code == 1
    body = json.loads(out.getvalue())
    assert body["status"] == "failing" and body["redis"].startswith("failed: ") and body["database"] == "ok"


def test_the_wsgi_module_loads_the_urls_and_freezes_them_before_serving_and_opens_no_connection_to_share():
    """gunicorn preloads the application in its master (platform/gunicorn.conf.py) and forks the workers:
    the URLs and views are imported there, and no database or broker connection is open to be shared."""
    import os
    import secrets
    import subprocess
    import sys

    assert "preload_app = " in (ROOT / "platform" / "gunicorn.conf.py").read_text()
    probe = (
        "import sys, config.wsgi\n"
        "from django.db import connections\n"
        "from celery import current_app\n"
        "print('urls' if 'annotation.api.work' in sys.modules else 'no urls')\n"
        "print('open' if any(c.connection is not None for c in connections.all(initialized_only=True)) else 'closed')\n"
        "print('no broker' if current_app._pool is None else 'broker')\n"
        "import gc\n"
        "print('frozen' if gc.get_freeze_count() > 100_000 else gc.get_freeze_count(), gc.get_threshold()[0])\n"
    )
    env = {**os.environ, "SECRET_KEY": secrets.token_urlsafe(48), "RUBRICA_SECRETS_KEY": secrets.token_urlsafe(48),
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # The loaded application is set aside from the garbage collector, which runs less often (core.gc_tuning).
    assert out.stdout.splitlines() == ["urls", "closed", "no broker", "frozen 10000"]
