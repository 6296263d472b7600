"""Operations runs: investigate a failing Kubernetes service, fix its config, verify the rollout."""

from __future__ import annotations

import random
import re

from .data import INCIDENTS, Project
from .opstools import (
    OPS,
    disk_usage,
    health_json,
    incident_manifest,
    kubectl_describe,
    kubectl_pods,
    listening_ports,
    metrics_json,
    replace_status,
    service_log,
)
from .randtext import rand_str
from .run import Run, RowSpec
from .testruns import unified_diff
from .trajectory import PHRASES, Call, Trajectory, final_answer, read_call, terminal

# The events table has always drawn pod names from this alphabet (no "l"), unlike kubectl_pods.
EVENT_POD_CHARS = "bcdfghjkmnpqrstvwxz2456789"


class OpsRun(Run):
    """One log-investigation or incident trajectory against a fictional Kubernetes service."""

    def __init__(self, rng: random.Random, spec: RowSpec, project: Project):
        super().__init__(rng, spec)
        self.p = project
        self.svc = project.name
        self.ns = rng.choice(("prod", "payments", "platform", "edge"))
        self.inc = rng.choice(INCIDENTS)
        tools = ["terminal", "read_file", "patch", "search_files", "web_search"]
        self.t = Trajectory(rng, spec.lang, tools, f"/workspace/{project.name}-ops", "ops")
        self.manifest, self.lines, self.idx = incident_manifest(rng, project, self.inc)
        self.day = rng.randint(3, 27)
        self.start = rng.randint(1, 20) * 3600 + rng.randint(0, 3599)
        self.pattern = re.sub(r"\{[a-z]+\}", ".*", self.inc.errors[0].split(":")[0])[:48]

    def slots(self, **extra) -> dict:
        base = {
            "svc": self.svc,
            "pattern": f"'{self.pattern}'",
            "key": self.inc.fix_key,
            "path": self.manifest,
            "func": self.svc,
            "pkg": self.svc,
        }
        base.update(extra)
        return base

    def error_obs(self) -> tuple[str, dict]:
        head = self.inc.errors[0].split(":")[0]
        dummy = {"pool": 5, "timeout": 30, "pid": 1, "n": 1, "mb": 1, "id": 1, "noun": "x", "ms": 1, "rid": "0"}
        return ("logs", {"error": head.format(**dummy, svc=self.svc)})

    def kubectl(self, command: str) -> str:
        return f"kubectl -n {self.ns} {command}"

    def exec(self, command: str) -> str:
        return self.kubectl(f"exec deploy/{self.svc} -- {command}")

    # -- investigation actions -------------------------------------------------

    def logs_call(self, n_lines: int) -> Call:
        out = service_log(self.rng, self.svc, self.p.nouns, self.inc, n_lines, self.day, self.start)
        self.start += n_lines * 0.7
        return terminal(self.kubectl(f"logs deploy/{self.svc} --since=30m --tail={n_lines}"), out)

    def act_logs(self, plan: str = "logs") -> None:
        n = int(max(15, min(160, self.room() / 32)))
        self.t.step(plan, self.slots(), [self.logs_call(n)], self.error_obs())

    def act_grep_logs(self, plan: str = "grep_logs") -> None:
        rng = self.rng
        n = int(max(8, min(60, self.room() / 40)))
        sample = service_log(rng, self.svc, self.p.nouns, self.inc, n * 3, self.day, self.start).split("\n")
        errors = [ln for ln in sample if " ERROR " in ln][:n]
        out = f"{rng.randint(200, 9000)}\n---\n" + "\n".join(errors)
        logs = self.kubectl(f"logs deploy/{self.svc} --since=2h")
        cmd = f"{logs} | grep -c ERROR; {logs} | grep ERROR | tail -{n}"
        self.t.step(plan, self.slots(), [terminal(cmd, out)], self.error_obs())

    def act_describe(self, plan: str = "describe") -> None:
        out = kubectl_describe(self.rng, self.svc, self.inc, self.ns, self.p)
        cmd = self.kubectl(f"describe pod -l app.kubernetes.io/name={self.svc} | head -60")
        self.t.step(plan, self.slots(), [terminal(cmd, out)])

    def act_health(self, plan: str = "health") -> None:
        out = health_json(self.rng, self.svc, self.inc)
        self.t.step(plan, self.slots(), [terminal(self.exec(f"curl -s localhost:{self.p.port}/healthz"), out)])

    def act_metrics(self, plan: str = "metrics") -> None:
        q = f'sum(rate(http_requests_total{{service="{self.svc}",code=~"5.."}}[5m]))'
        cmd = f"curl -s 'http://prometheus.monitoring:9090/api/v1/query_range?query={q}&step=60'"
        self.t.step(plan, self.slots(), [terminal(cmd, metrics_json(self.rng, self.svc, "http_requests_total"))])

    def act_disk(self, plan: str = "disk") -> None:
        cmd = self.exec(f"sh -c 'df -h; du -sh /var/log/{self.svc}/* | sort -h | tail'")
        self.t.step(plan, self.slots(), [terminal(cmd, disk_usage(self.rng, self.svc, self.inc.key == "disk"))])

    def act_ports(self, plan: str = "ports") -> None:
        self.t.step(plan, self.slots(), [terminal(self.exec("ss -ltnp"), listening_ports(self.rng, self.p))])

    def act_manifest(self, plan: str = "config") -> None:
        self.t.step(plan, self.slots(), [read_call(self.manifest, self.lines)], ("config", {"path": self.manifest}))

    def act_events(self, plan: str = "describe") -> None:
        rng = self.rng
        rows = [f"{'LAST SEEN':<10} {'TYPE':<8} {'REASON':<22} {'OBJECT':<44} MESSAGE"]
        for _ in range(rng.randint(6, 16)):
            # The scaling event's random parts are drawn before the event is chosen, whichever it is.
            slots = {
                "unhealthy": self.inc.event.split("  ")[-1],
                "svc": self.svc,
                "replica_set": rand_str(rng, EVENT_POD_CHARS, 10),
                "replicas": rng.randint(2, 6),
            }
            kind, reason, msg = rng.choice(OPS["events"])
            pod = f"{self.svc}-{rand_str(rng, EVENT_POD_CHARS, 10)}-{rand_str(rng, EVENT_POD_CHARS, 5)}"
            age = str(rng.randint(1, 59)) + "m"
            rows.append(f"{age:<10} {kind:<8} {reason:<22} {'pod/' + pod:<44} {msg.format(**slots)}")
        cmd = self.kubectl("get events --sort-by=.lastTimestamp | tail -20")
        self.t.step(plan, self.slots(), [terminal(cmd, "\n".join(rows))])

    def act_web(self, plan: str = "search") -> None:
        rng = self.rng
        err = self.inc.errors[0].split(":")[0].split("{")[0].strip()
        slots = {"err": err, "org": self.p.org, "svc": self.svc}
        slots["question"] = rng.randint(40000000, 79999999)
        slots["issue"] = rng.randint(100, 900)
        items = [
            {"url": f"https://{site.format(**slots)}", "title": title.format(**slots), "description": desc}
            for site, title, desc in OPS["web_results"]
        ]
        call = Call("web_search", {"query": err}, {"success": True, "data": {"web": items}})
        self.t.step(plan, self.slots(query=f'"{err}"'), [call], ("web", {}))

    def fill_middle(self) -> None:
        self.fill(
            [
                (3, self.act_logs),
                (2, self.act_grep_logs),
                (1, self.act_describe, True),
                (1, self.act_health, True),
                (1, self.act_metrics, True),
                (0.7, self.act_disk, True),
                (0.5, self.act_ports, True),
                (1, self.act_manifest, True),
                (0.7, self.act_web),
                (0.6, self.act_events, True),
            ],
            {"func": self.svc, "module": self.svc},
        )

    # -- the run -------------------------------------------------------------

    def build(self) -> None:
        rng, inc = self.rng, self.inc
        tasks = PHRASES["tasks"][self.spec.category]
        lang = self.lang if self.lang in tasks else "en"
        symptoms = PHRASES["symptoms"]
        symptom = symptoms[lang][inc.key] if lang in symptoms else inc.symptom
        hh, mm = divmod(self.start // 60 % 1440, 60)
        self.t.human(
            rng.choice(tasks[lang]).format(svc=self.svc, ns=self.ns, symptom=symptom, hh=f"{hh:02d}", mm=f"{mm:02d}")
        )
        if self.spec.special == "huge_head":
            self.t.step("logs", self.slots(), [self.logs_call(180)], self.error_obs())
        else:
            pods = terminal(self.kubectl("get pods -o wide | head -20"), kubectl_pods(rng, self.svc, inc, self.ns))
            self.t.step("pods", self.slots(), [pods])
        self.fill_middle()
        self.fix()
        self.closing(self.rollout())

    def fix(self) -> None:
        """Patch the faulty setting in the manifest."""
        old = self.lines[self.idx]
        new = old.replace(self.inc.fix_old, self.inc.fix_new)
        diff = unified_diff(self.manifest, self.lines, self.idx, new, self.rng)
        call = Call(
            "patch",
            {"path": self.manifest, "old_string": old, "new_string": new},
            {"success": True, "path": self.manifest, "replacements": 1, "diff": diff},
        )
        self.t.step("fix_config", self.slots(), [call])

    def rollout(self) -> str:
        """Apply the fixed manifest and wait for the rollout; returns the command used."""
        if self.manifest.endswith(".yaml"):
            status = self.kubectl(f"rollout status deploy/{self.svc} --timeout=180s")
            apply = f"{self.kubectl(f'apply -f {self.manifest}')} && {status}"
        else:
            apply = f"make -C deploy apply SERVICE={self.svc} && {self.kubectl(f'rollout restart deploy/{self.svc}')}"
        n = self.rng.randint(3, 6)
        waiting = [
            f'Waiting for deployment "{self.svc}" rollout to finish: {i} of {n} updated replicas are available...'
            for i in range(1, n)
        ]
        done = f'deployment "{self.svc}" successfully rolled out'
        rollout = "\n".join([f"deployment.apps/{self.svc} configured"] + waiting + [done])
        self.t.step("restart", self.slots(), [terminal(apply, rollout)])
        return apply

    def closing(self, apply: str) -> None:
        rng = self.rng
        healthy = replace_status(kubectl_pods(rng, self.svc, self.inc, self.ns))
        pods = self.kubectl(f"get pods -l app.kubernetes.io/name={self.svc}")
        self.t.step("verify", self.slots(), [terminal(pods, healthy)])
        grep = f"{self.kubectl(f'logs deploy/{self.svc} --since=10m')} | grep -c '{self.pattern}'"
        self.t.step("verify", self.slots(), [terminal(grep, "0", 1)], ("clean", {}))
        lang = self.lang
        causes = PHRASES["causes"]
        cause = causes[lang][self.inc.key] if lang in causes else self.inc.cause
        cause = cause[0].upper() + cause[1:] + ("。" if lang == "zh" else ".")
        changes = [(self.manifest, f"`{self.inc.fix_key}`: {self.inc.fix_old} → {self.inc.fix_new}")]
        checks = [(apply.split(" && ")[-1], PHRASES["rollout_ok"][lang]), (grep, PHRASES["no_errors"][lang])]
        notes = rng.sample(PHRASES["followup_notes"]["ops"][lang], 2)
        self.t.final(final_answer(lang, cause, changes, checks, notes))
