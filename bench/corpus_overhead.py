#!/usr/bin/env python3
"""The cost of verifying each program of the corpus that counts steps, per step, against the same
program unobserved: for every program below, its clean scenario is run under `lockstep run` twice
a round in each of three modes: plain (wrap = "none", verify = "off": the program's own process
groups, unobserved), verify (lockstep's default) and detail (plain under PyTorch's own checker,
TORCH_DISTRIBUTED_DEBUG=DETAIL), the modes and programs interleaved round by round so that the load
of this shared machine falls on all of them alike. Each run reports its ranks' median step
(metrics.median_step_s, optimizer step to optimizer step); a mode's cost is the median over rounds
of its median step over plain's in the same round (1.10 = 10% slower).

  [LOCKSTEP_PYTHON=PY] bench/corpus_overhead.py [ROUNDS (default 5)] [PROGRAM ...]

PROGRAM names some of the programs below (default: all of them); a run of some writes
reports/evidence-corpus-overhead-<names>.{md,json} instead of the whole corpus's file.

Needs build/lockstep and build/python/liblockstep_program.so; PY defaults to the torch 2.15.0 venv
that `ci/setup` makes (the 2.x-only programs are skipped under a torch without
torch.distributed.tensor); the TorchRec program runs with the venv `ci/systems torchrec-1.9.2`
makes (torch 2.14.1), skipped without it. Writes reports/evidence-corpus-overhead.{md,json}. About 3.5 minutes a
round on 2 shared cores. A run that fails is run again, up to three times (torch 2.15.0 now and
then aborts at exit, natively too), and listed; a third failure stops the bench.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name: (clean scenario, extra arguments that lengthen the run to enough steps for a median, the
# interpreter: None for PY, else the venv `ci/systems NAME` makes, skipped when it is not there)
PROGRAMS = {
    "ddp_sage": ("scenarios/programs/ddp_sage/clean.toml", ["--steps", "400"], None),
    "ddp_idioms": ("scenarios/programs/ddp_idioms/clean.toml", ["--steps", "400"], None),
    "fsdp2": ("scenarios/programs/fsdp2/clean.toml", ["--steps", "40"], None),
    "tp": ("scenarios/programs/tp/clean.toml", ["--steps", "40"], None),
    "torchrec": ("scenarios/programs/torchrec/clean.toml", ["--steps", "400"], "torchrec-1.9.2"),
}
TARGET = 1.10
MODES = ("plain", "verify", "detail")


def variant(path, mode, out_dir):
    """The scenario at `path` as a TOML of mode `mode` in `out_dir`, its {dir} made absolute."""
    with open(os.path.join(ROOT, path), "rb") as f:
        spec = tomllib.load(f)
    src_dir = os.path.dirname(os.path.join(ROOT, path))
    cmd = [c.replace("{dir}", src_dir) for c in spec["workload"]["command"]]
    lines = ['name = "bench.corpus.%s"' % mode, 'description = "bench/corpus_overhead.py, mode %s"' % mode, "",
             "[run]", "world_size = %d" % spec["run"].get("world_size", 2), "timeout_s = 300"]
    if mode != "verify":
        lines.append('verify = "off"')
    lines += ["", "[workload]", 'kind = "program"', "command = %s" % json.dumps(cmd),
              "python_modules = %s" % json.dumps(spec["workload"].get("python_modules", ["torch"]))]
    if mode != "verify":
        lines.append('wrap = "none"')
    if mode == "detail":
        lines.append('env = ["TORCH_DISTRIBUTED_DEBUG=DETAIL"]')
    lines += ["", "[expect]", 'outcome = "pass"', ""]
    target = os.path.join(out_dir, "%s.toml" % mode)
    with open(target, "w") as f:
        f.write("\n".join(lines))
    return target


def run_once(toml, report, python):
    """One run: its median step in seconds, None when the scenario was skipped; raises on failure."""
    cmd = [os.path.join(ROOT, "build/lockstep"), "run", toml, "--python", python, "--report-dir", report]
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(report, "results.json")) as f:
        s = json.load(f)["scenarios"][0]
    if s["status"] == "skip":
        return None
    if p.returncode != 0 or s["status"] != "pass":
        raise RuntimeError("%s: exit %d, %s: %s" % (toml, p.returncode, s["status"], s.get("diagnosis", s.get("reason", ""))))
    return s["metrics"]["median_step_s"]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    only = sys.argv[2:]
    unknown = [n for n in only if n not in PROGRAMS]
    if unknown:
        sys.exit("bench/corpus_overhead.py: no program %s (the corpus: %s)" % (", ".join(unknown), ", ".join(PROGRAMS)))
    if only:
        for name in [n for n in PROGRAMS if n not in only]:
            del PROGRAMS[name]
    python = os.environ.get("LOCKSTEP_PYTHON", os.path.expanduser("~/.cache/lockstep/venv-torch-2.15.0/bin/python"))
    torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                                   check=True).stdout.strip()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    # lockstep_fast built before any timed run (a run without it would build it in the background,
    # beside the runs it times).
    subprocess.run([os.path.join(ROOT, "ci/fast"), python] + [os.path.expanduser("~/.cache/lockstep/systems/%s/bin/python" % v)
                                                              for _, _, v in PROGRAMS.values() if v], check=False)
    work = tempfile.mkdtemp(prefix="lockstep-corpus-overhead.")
    tomls = {}
    pythons = {}
    for name, (path, extra, system) in PROGRAMS.items():
        pythons[name] = python if system is None else os.path.join(
            os.environ.get("LOCKSTEP_DEPS", os.path.expanduser("~/.cache/lockstep")), "systems", system, "bin", "python")
        d = os.path.join(work, name)
        os.makedirs(d)
        tomls[name] = {}
        for mode in MODES:
            t = variant(path, mode, d)
            with open(t) as f:
                text = f.read()
            args = json.dumps(extra)[1:-1]
            text = text.replace('"]\npython_modules', '", %s]\npython_modules' % args, 1)
            with open(t, "w") as f:
                f.write(text)
            tomls[name][mode] = t
    steps = {name: {m: [] for m in MODES} for name in PROGRAMS}
    retries = []
    skipped = {name for name in PROGRAMS if not os.path.exists(pythons[name])}
    no_detail = {}  # program -> why DETAIL does not run it (PyTorch's own checker failing it, natively)
    for k in range(rounds):
        for name in PROGRAMS:
            if name in skipped:
                continue
            modes = MODES if k % 2 == 0 else tuple(reversed(MODES))
            for mode in modes:
                if mode == "detail" and name in no_detail:
                    continue
                for attempt in (1, 2, 3):
                    try:
                        v = run_once(tomls[name][mode], os.path.join(work, "%s.%s.%d.%d" % (name, mode, k, attempt)), pythons[name])
                        break
                    except RuntimeError as e:
                        if attempt == 3 and mode == "detail":
                            no_detail[name] = str(e)[:300]
                            v = "failed"
                            break
                        if attempt == 3:
                            sys.exit("bench/corpus_overhead.py: %s failed three times: %s" % (name, e))
                        retries.append("%s %s round %d: %s" % (name, mode, k + 1, str(e)[:200]))
                if v == "failed":
                    continue
                if v is None:
                    skipped.add(name)
                    break
                steps[name][mode].append(v)
        print("round %d of %d done" % (k + 1, rounds), flush=True)
    rows, data = [], {"commit": commit, "torch": torch_version, "rounds": rounds, "target": TARGET, "programs": {}}
    for name in PROGRAMS:
        if name in skipped:
            why = "skipped under torch %s" % torch_version if PROGRAMS[name][2] is None else "skipped: no %s (ci/systems %s)" % (
                pythons[name], PROGRAMS[name][2])
            rows.append("| %s | %s | | | | | |" % (name, why))
            continue
        plain, verify, detail = steps[name]["plain"], steps[name]["verify"], steps[name]["detail"]
        ratios = [v / p for p, v in zip(plain, verify)]
        cost = statistics.median(ratios)
        if name in no_detail:  # DETAIL's runs of this program do not count: it does not run it
            detail, detail_ratios, detail_cost = [], [], None
        else:
            detail_ratios = [v / p for p, v in zip(plain, detail)]
            detail_cost = statistics.median(detail_ratios)
        data["programs"][name] = {"plain_median_step_s": plain, "verify_median_step_s": verify, "detail_median_step_s": detail,
                                  "ratios": ratios, "detail_ratios": detail_ratios, "cost": cost, "detail_cost": detail_cost}
        detail_cells = ("DETAIL fails it", "-") if name in no_detail else (
            "%.2f" % (1000 * statistics.median(detail)), "%.3fx" % detail_cost)
        label = name if PROGRAMS[name][2] is None else "%s (%s)" % (name, PROGRAMS[name][2])
        rows.append("| %s | %.2f | %.2f | **%.3fx** %s | %s | %s | %s |" % (
            label, 1000 * statistics.median(plain), 1000 * statistics.median(verify), cost,
            "met" if cost <= TARGET else "NOT met", detail_cells[0], detail_cells[1],
            ", ".join("%.2f" % r for r in ratios)))
    md = ["# Evidence: the per-step cost of verifying the program corpus", "",
          "Commit `%s`, `bench/corpus_overhead.py %d`, **torch %s**. Each program's clean scenario with more" % (commit, rounds, torch_version),
          "steps, plain (`wrap = \"none\"`, `verify = \"off\"`), verify and DETAIL (plain with `TORCH_DISTRIBUTED_DEBUG=DETAIL`),",
          "interleaved round by round on this shared",
          "2-core machine. Cost = the median over rounds of verify's median step / plain's in the same round;",
          "target (issue 44) at most %.2fx. The ops, groups and pipeline programs (a few rounds each) are not timed." % TARGET, "",
          "| program | plain median step ms | verify median step ms | verify per-step cost | DETAIL median step ms | DETAIL per-step cost | verify ratio per round |",
          "|---|---|---|---|---|---|---|"] + rows
    if no_detail:
        md += ["", "Programs DETAIL does not run (a DETAIL run fails three times; lockstep does not wrap its groups there, wrap = \"none\", it only counts steps):"]
        md += ["- %s: %s" % (n, why) for n, why in sorted(no_detail.items())]
    data["detail_fails"] = no_detail
    if retries:
        md += ["", "Failed runs, each run again (only the run that passed counts):"] + ["- " + r for r in retries]
    out = os.path.join(ROOT, "reports/evidence-corpus-overhead" + ("-" + "-".join(only) if only else ""))
    with open(out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
