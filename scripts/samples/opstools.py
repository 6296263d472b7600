"""Operations tool outputs: service logs, kubectl tables, health checks, metrics, manifests."""

from __future__ import annotations

import json
import random
import re

from .codegen import VERBS
from .data import Incident, Project, load
from .randtext import HEX, POD_CHARS, fmt_ts, rand_str, sha
from .repo import k8s_deployment

OPS = load("ops")


def log_line(rng: random.Random, svc: str, nouns: tuple[str, ...], ts: str, incident: Incident | None) -> list[str]:
    """One service log line (plus an optional traceback for errors)."""
    slots = {
        "method": rng.choice(("GET", "GET", "POST", "PUT", "DELETE")),
        "noun": rng.choice(nouns),
        "id": rng.randint(1000, 99999),
        "status": rng.choice((200, 200, 200, 201, 204, 404)),
        "ms": rng.randint(2, 900),
        "rid": rand_str(rng, HEX, 12),
        "n": rng.randint(1, 5000),
        "small": rng.randint(0, 9),
        "hm": rng.choice(("hit", "miss")),
        "ttl": rng.choice((30, 300, 3600)),
        "pid": rng.randint(7, 400),
        "mb": rng.randint(90, 760),
        "sec": round(rng.uniform(0.1, 40), 2),
        "svc": svc,
        "flag": rng.choice(("true", "false")),
        "pool": 5,
        "timeout": 30,
        "pool_used": rng.randint(1, 20),
    }
    worker = f"worker-{rng.randint(1, 8)}"
    if incident is None or rng.random() > 0.35:
        return [f"{ts} INFO  [{worker}] {svc}: {rng.choice(OPS['log_routine']).format(**slots)}"]
    lines = [f"{ts} ERROR [{worker}] {svc}: {rng.choice(incident.errors).format(**slots)}"]
    if rng.random() < 0.25:
        module = rng.choice(("api", "handlers", "db", "client", "jobs"))
        lines += [
            "Traceback (most recent call last):",
            f'  File "/app/{svc.replace("-", "_")}/{module}.py", line {rng.randint(20, 400)}, in {rng.choice(VERBS)}_{slots["noun"]}',
            f"    return await self._{rng.choice(VERBS)}({slots['noun']}_id, timeout=self.timeout)",
            f'  File "/usr/local/lib/python3.11/site-packages/sqlalchemy/pool/impl.py", line {rng.randint(100, 200)}, in _do_get',
            "    raise exc.TimeoutError(" if incident.key == "db_pool" else "    raise",
            incident.errors[0].format(**slots),
        ]
    return lines


def service_log(
    rng: random.Random,
    svc: str,
    nouns: tuple[str, ...],
    incident: Incident | None,
    n_lines: int,
    day: int,
    start_s: float,
) -> str:
    """A chunk of a service log with routine lines and the incident's error signature."""
    out: list[str] = []
    t = start_s
    while len(out) < n_lines:
        t += rng.expovariate(1.5)
        out += log_line(rng, svc, nouns, fmt_ts(day, t), incident)
    return "\n".join(out[:n_lines])


def pod_name(rng: random.Random, svc: str) -> str:
    """A Deployment pod name: service, replica-set hash, pod suffix."""
    return f"{svc}-{rand_str(rng, POD_CHARS, 10)}-{rand_str(rng, POD_CHARS, 5)}"


def kubectl_pods(rng: random.Random, svc: str, incident: Incident, namespace: str) -> str:
    """`kubectl get pods` table."""
    out = [f"{'NAME':<44}{'READY':<8}{'STATUS':<20}{'RESTARTS':<16}AGE"]
    for other in ("postgres-0", "redis-master-0", pod_name(rng, f"{svc}-worker")):
        out.append(f"{other:<44}{'1/1':<8}{'Running':<20}{'0':<16}{rng.randint(2, 40)}d")
    rs = rand_str(rng, POD_CHARS, 10)
    for _ in range(rng.randint(3, 6)):
        name = f"{svc}-{rs}-{rand_str(rng, POD_CHARS, 5)}"
        restarts = rng.randint(3, 41) if incident.pod_status != "Running" else rng.randint(0, 2)
        ready = "0/1" if incident.pod_status != "Running" or rng.random() < 0.3 else "1/1"
        restarts_text = f"{restarts} ({rng.randint(1, 50)}m ago)"
        out.append(f"{name:<44}{ready:<8}{incident.pod_status:<20}{restarts_text:<16}{rng.randint(1, 9)}h")
    return "\n".join(out)


def kubectl_describe(rng: random.Random, svc: str, incident: Incident, namespace: str, project: Project) -> str:
    """`kubectl describe pod` output with events."""
    oom = incident.key == "oom"
    lines = [
        f"Name:             {pod_name(rng, svc)}",
        f"Namespace:        {namespace}",
        "Priority:         0",
        f"Node:             ip-10-0-{rng.randint(1, 9)}-{rng.randint(10, 250)}.eu-west-1.compute.internal/10.0.{rng.randint(1, 9)}.{rng.randint(10, 250)}",
        f"Start Time:       Fri, 14 Mar 2025 0{rng.randint(0, 9)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} +0000",
        f"Labels:           app.kubernetes.io/name={svc}",
        f"                  pod-template-hash={rand_str(rng, POD_CHARS, 10)}",
        "Status:           Running",
        f"IP:               10.42.{rng.randint(0, 9)}.{rng.randint(2, 250)}",
        "Containers:",
        "  app:",
        f"    Image:          ghcr.io/{project.org}/{project.name}:{rng.randint(1, 3)}.{rng.randint(10, 40)}.{rng.randint(0, 9)}",
        f"    Port:           {project.port}/TCP",
        "    State:          Running",
        f"      Started:      Fri, 14 Mar 2025 0{rng.randint(0, 9)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} +0000",
        "    Last State:     Terminated" if oom else "    Last State:     <none>",
        "      Reason:       OOMKilled" if oom else "",
        "      Exit Code:    137" if oom else "",
        f"    Ready:          {rng.choice(('True', 'False'))}",
        f"    Restart Count:  {rng.randint(0, 30)}",
        "    Limits:",
        f"      memory:  {'256Mi' if oom else '1Gi'}",
        "    Requests:",
        "      cpu:     250m",
        "      memory:  128Mi",
        f"    Readiness:  http-get http://:{project.port}/healthz delay=0s timeout=1s period=10s #success=1 #failure=3",
        "Conditions:",
        "  Type              Status",
        "  Initialized       True",
        "  Ready             False",
        "  ContainersReady   False",
        "  PodScheduled      True",
    ]
    return "\n".join(lines + _describe_events(rng, incident)).replace("\n\n", "\n")


def _describe_events(rng: random.Random, incident: Incident) -> list[str]:
    """The Events section closing `kubectl describe pod`."""
    reason = incident.event.split()[1] if incident.event.startswith("Warning") else "BackOff"
    return [
        "Events:",
        "  Type     Reason     Age                  From     Message",
        "  ----     ------     ----                 ----     -------",
        f"  Normal   Pulled     {rng.randint(10, 50)}m (x{rng.randint(2, 9)} over 2h)  kubelet  Container image already present on machine",
        f"  Warning  {reason}  {rng.randint(1, 9)}m (x{rng.randint(10, 300)} over 2h)  kubelet  {incident.event}",
    ]


def health_json(rng: random.Random, svc: str, incident: Incident) -> str:
    """A /healthz JSON body from the service."""
    deps = {
        "database": {
            "status": "degraded" if incident.key in ("db_pool", "migration") else "ok",
            "latency_ms": rng.randint(2, 9000),
            "pool": {"size": 5, "checked_out": 5, "overflow": 0},
        },
        "redis": {"status": "ok", "latency_ms": rng.randint(1, 4)},
        "upstreams": {
            "pricing": "unreachable" if incident.key == "dns" else "ok",
            "webhooks": "tls_error" if incident.key == "tls" else "ok",
        },
        "disk": {"spool_free_bytes": 0 if incident.key == "disk" else rng.randint(10**9, 10**10)},
    }
    body = {
        "service": svc,
        "version": f"2.{rng.randint(10, 16)}.{rng.randint(0, 5)}",
        "commit": sha(rng, 12),
        "status": "unhealthy",
        "checks": deps,
        "uptime_s": rng.randint(30, 90000),
    }
    return json.dumps(body, indent=2)


def metrics_json(rng: random.Random, svc: str, metric: str) -> str:
    """A Prometheus range-query API response."""
    values = []
    t0 = 1741917600
    level = rng.uniform(0.01, 0.2)
    for i in range(rng.randint(12, 30)):
        level = max(0.0, level + rng.uniform(-0.05, 0.3 if i > 6 else 0.02))
        values.append([t0 + i * 60, f"{level:.4f}"])
    series = {
        "metric": {"__name__": metric, "service": svc, "pod": f"{svc}-{rand_str(rng, 'abcdef0123456789', 5)}"},
        "values": values,
    }
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [series]}})


def disk_usage(rng: random.Random, svc: str, full: bool) -> str:
    """`df -h` followed by `du` of the biggest directories."""
    use = 100 if full else rng.randint(20, 70)
    out = [
        "Filesystem      Size  Used Avail Use% Mounted on",
        "overlay          80G   31G   49G  39% /",
        "tmpfs            64M     0   64M   0% /dev",
        f"/dev/nvme1n1     20G   {20 * use // 100}G   {20 - 20 * use // 100}G  {use}% /var",
        "shm              64M     0   64M   0% /dev/shm",
        "",
        f"$ du -sh /var/log/{svc}/* | sort -h | tail",
    ]
    for name in ("gc.log", "access.log.1", "audit.log", "app.log.2.gz", "app.log"):
        out.append(f"{rng.randint(1, 900)}{rng.choice('MG')}\t/var/log/{svc}/{name}")
    return "\n".join(out)


def listening_ports(rng: random.Random, project: Project) -> str:
    """`ss -ltnp` output."""
    out = ["State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process"]
    for port, proc in (
        (project.port, "gunicorn" if project.lang == "py" else "node"),
        (5432, "postgres"),
        (6379, "redis-server"),
        (9090, "prometheus"),
        (rng.randint(30000, 32000), "kube-proxy"),
    ):
        out.append(
            f'LISTEN 0      {rng.choice((128, 511, 4096)):<6} 0.0.0.0:{port:<12} 0.0.0.0:*     users:(("{proc}",pid={rng.randint(100, 9000)},fd={rng.randint(3, 30)}))'
        )
    return "\n".join(out)


def incident_manifest(rng: random.Random, p: Project, inc: Incident) -> tuple[str, list[str], int]:
    """The config file holding the incident's faulty setting, and the index of that line."""
    if inc.key == "disk":
        lines = [ln.format(p=p, old=inc.fix_old) for ln in OPS["manifests"]["logrotate"]]
        return f"deploy/logrotate/{p.name}.conf", lines, 3
    if inc.key == "migration":
        noun = p.nouns[0]
        lines = [ln.format(noun=noun) for ln in OPS["manifests"]["migration"]]
        return f"migrations/versions/0047_add_{noun}_region.py", lines, 15
    lines = k8s_deployment(rng, p).split("\n")
    path = f"deploy/k8s/{p.name}.yaml"
    if inc.key == "oom":
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith("memory:") and "limits:" in lines[i - 1])
        lines[idx] = lines[idx].split(":")[0] + f": {inc.fix_old}"
        return path, lines, idx
    env = next(i for i, ln in enumerate(lines) if ln.strip() == "env:")
    if inc.key == "db_pool":
        idx = next(i for i, ln in enumerate(lines) if "DB_POOL_SIZE" in ln) + 1
        lines[idx] = f'              value: "{inc.fix_old}"'
        return path, lines, idx
    lines[env + 1 : env + 1] = [f"            - name: {inc.fix_key}", f'              value: "{inc.fix_old}"']
    return path, lines, env + 2


def replace_status(table: str) -> str:
    """Turn a pod table into the healthy version seen after the fix."""
    out = []
    for line in table.split("\n"):
        line = re.sub(r"CrashLoopBackOff\s*", f"{'Running':<20}", line).replace("0/1 ", "1/1 ")
        out.append(re.sub(r"\d+ \(\d+m ago\)\s*", f"{'0':<16}", line))
    return "\n".join(out)
