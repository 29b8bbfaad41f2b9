// `lockstep torchrun [torchrun's options] train.py [args]`: a program run with no scenario file.
// The program becomes a kind = "program" scenario built here, in memory, that must pass, and runs
// through the same launcher, watch loop and checks as a scenario file's (launch::run_suite).
#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/python.h"
#include "harness/launch/suite.h"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxWorldSize = 64;  // as run.world_size

// torchrun's --nnodes: "N", or "N:N" (an elastic range MIN:MAX with MIN < MAX is refused).
int parse_nnodes(const std::string& text) {
  const auto colon = text.find(':');
  auto number = [&](const std::string& part) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || n < 1) throw InputError("--nnodes: must be a positive integer or N:N, got '" + text + "'");
    return n;
  };
  if (colon == std::string::npos) return number(text);
  const int lo = number(text.substr(0, colon)), hi = number(text.substr(colon + 1));
  if (lo != hi) throw InputError("--nnodes " + text + ": elastic ranges are not supported; give a fixed number of nodes");
  return lo;
}

// "train" from "dir/train.py", as a name part: [a-z0-9_-] kept, anything else '_'.
std::string name_part(const std::string& script) {
  std::string stem = fs::path(script).stem().string();
  for (char& c : stem) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    else if (!ok) c = '_';
  }
  return stem.empty() ? "program" : stem;
}

// "0,2" -> {0, 2}; "" -> {} (every rank). InputError on anything else or a rank outside the world.
std::vector<int> parse_ranks_filter(const std::string& text, int world_size) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    std::size_t used = 0;
    int r = -1;
    try {
      r = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || r < 0 || r >= world_size) {
      throw InputError("--local-ranks-filter: '" + part + "' is not a rank in [0, " + std::to_string(world_size) + ")");
    }
    ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

void add_torchrun(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "torchrun",
      "Run a PyTorch program as torchrun would, with every collective recorded and verified: no scenario file.\n"
      "  lockstep torchrun [options] train.py [args...]\n"
      "Options go before the script; everything from the script on is the program's. The program runs as a\n"
      "kind = \"program\" scenario that must pass (scenarios/README.md, \"Programs\"): each rank is\n"
      "`PYTHON train.py args...` with torchrun's variables, its default process group (any backend) is\n"
      "wrapped by lockstep, and the run is watched and judged as `lockstep run` does. Prints who waited for whom\n"
      "(each rank's wait and compute at its collectives, and the straggler, if one rank kept the others waiting:\n"
      "scenarios/README.md, \"Waits and stragglers\"), the verdict and the report folder. Exit codes: 0 the program ran and nothing was diagnosed; 1 a diagnosis (collective_mismatch,\n"
      "missing_participant, timeout, rank_failure, ...), an error, or the program could not run here (skip: its\n"
      "interpreter lacks torch or this build's backend); 2 a usage error (an unknown or unsupported torchrun option\n"
      "is named); 130/143 interrupted.");
  struct Args {
    int nproc_per_node = 1;
    std::string nnodes = "1";
    int node_rank = 0;
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
    bool standalone = false;
    std::string report_dir;
    double timeout_s = 600;
    bool no_contain = false;
    std::string python;
    std::string local_ranks_filter;
    std::string redirects = "0";
    std::string tee;
    std::string log_dir;
    std::string curve;
    Tolerances tolerances;
  };
  auto a = std::make_shared<Args>();
  cmd->prefix_command();  // the first argument that is not one of these options is the script
  cmd->add_option("--nproc-per-node,--nproc_per_node", a->nproc_per_node,
                  "torchrun's: ranks (processes) on this node (an integer; torchrun's auto, cpu and gpu are not supported)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorldSize));
  cmd->add_option("--nnodes", a->nnodes,
                                 "torchrun's: number of nodes, N (or N:N); the world size is nproc-per-node x nnodes. With N > 1,\n"
                                 "run this command on every node with its --node-rank and the same --master-addr and\n"
                                 "--master-port: each node's lockstep starts and watches its own ranks")
      ->capture_default_str();
  cmd->add_option("--node-rank,--node_rank", a->node_rank, "torchrun's: this node's rank, in [0, nnodes)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  auto* addr = cmd->add_option("--master-addr,--master_addr", a->master_addr,
                               "torchrun's: the address of node 0, where the program's rank 0 hosts its store")
                   ->capture_default_str();
  auto* port = cmd->add_option("--master-port,--master_port", a->master_port,
                               "torchrun's: the store's port on node 0 (default with --nnodes 1: a free port on 127.0.0.1\n"
                               "chosen per run, as --standalone does; with more nodes: 29500)")
                   ->check(CLI::Range(1, 65535));
  cmd->add_flag("--standalone", a->standalone,
                "torchrun's: one node, the store on a free port of 127.0.0.1 (what lockstep does anyway with --nnodes 1\n"
                "and no --master-port); refused with --nnodes > 1, --master-addr or --master-port");
  add_python_option(cmd, a->python, "\nlockstep's: it runs the script; any torch from 1.13 to 2.15");
  cmd->add_option("--report-dir", a->report_dir,
                  "lockstep's: write results.json, junit.xml and the ranks' logs and traces here (default: a new folder per\n"
                  "run, lockstep-report/run-<UTC time>-<pid>, with lockstep-report/latest pointing at it)");
  cmd->add_option("--timeout-s", a->timeout_s,
                  "lockstep's: a rank that makes no progress (no collective issued or completed) for this long, once every\n"
                  "rank has started, is a timeout (run.timeout_s); start-up has its own bound, 120 s")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0) & finite());
  cmd->add_option("--local-ranks-filter,--local_ranks_filter", a->local_ranks_filter,
                  "torchrun's: echo only these ranks' output on the console (comma-separated, e.g. 0 or 0,2); every\n"
                  "rank's output is in its log either way");
  cmd->add_option("--redirects,-r", a->redirects,
                  "torchrun's: 0 (default) echoes each rank's lines live with a [rankN]: prefix; any other value keeps\n"
                  "the ranks' output in their logs only (REPORT_DIR/<scenario>/rank<N>.log)");
  cmd->add_option("--tee,-t", a->tee, "torchrun's: accepted; the ranks' output always goes to their logs (and the console, see --redirects)");
  cmd->add_option("--log-dir,--log_dir", a->log_dir, "torchrun's: as --report-dir when that is not given");
  cmd->add_option("--curve", a->curve,
                  "[compare] curve: a regex over rank 0's log, groups (step, value) or (value), kept as results.json's "
                  "series \"loss\" (e.g. 'step (\\d+) loss (\\S+)')");
  cmd->add_option("--param-rtol", a->tolerances.param_rtol, "[compare] param_rtol, recorded in results.json's tolerances")
      ->check(CLI::Range(0.0, 1e30));
  cmd->add_option("--param-atol", a->tolerances.param_atol, "[compare] param_atol")->check(CLI::Range(0.0, 1e30));
  cmd->add_option("--curve-rtol", a->tolerances.curve_rtol, "[compare] curve_rtol")->check(CLI::Range(0.0, 1e30));
  add_no_contain_flag(cmd, a->no_contain);
  cmd->footer(
      "Examples:\n"
      "  lockstep torchrun --nproc-per-node 2 --python ~/.cache/lockstep/venv-torch-2.15.0/bin/python train.py --epochs 1\n"
      "  lockstep torchrun --nproc-per-node 4 -m mypackage.train --lr 0.1");
  cmd->callback([cmd, a, addr, port, &exit_code] {
    const std::vector<std::string> rest = cmd->remaining();
    if (rest.empty()) throw InputError("torchrun: no training script given (lockstep torchrun [options] train.py [args])");
    if (rest.front().size() > 1 && rest.front()[0] == '-' && rest.front() != "-m" && rest.front() != "--module") {
      throw InputError("torchrun: unsupported option '" + rest.front() +
                       "' (lockstep torchrun takes torchrun's --nproc-per-node, --nnodes, --node-rank, --master-addr, "
                       "--master-port and --standalone, and lockstep's --python, --report-dir, --timeout-s, --no-contain, --curve, --param-rtol, --param-atol and --curve-rtol, before the script)");
    }
    // `-m package.module [args]` runs a module, as torchrun's -m / python -m do.
    const bool module = rest.front() == "-m" || rest.front() == "--module";
    if (module && rest.size() < 2) throw InputError("torchrun: -m needs a module name (lockstep torchrun -m package.module [args])");
    const std::string script = module ? rest[1] : rest.front();
    const int n_nodes = parse_nnodes(a->nnodes);
    if (a->standalone) {
      if (n_nodes > 1) throw InputError("--standalone runs one node; it cannot be combined with --nnodes " + a->nnodes);
      if (addr->count() > 0 || port->count() > 0) throw InputError("--standalone chooses its own store address; drop --master-addr/--master-port");
    }
    if (a->node_rank >= n_nodes) {
      throw InputError("--node-rank: must be in [0, nnodes) = [0, " + std::to_string(n_nodes) + "), got " + std::to_string(a->node_rank));
    }
    if (a->nproc_per_node * n_nodes > kMaxWorldSize) {
      throw InputError("--nproc-per-node x --nnodes: at most " + std::to_string(kMaxWorldSize) + " ranks, got " +
                       std::to_string(a->nproc_per_node * n_nodes));
    }
    if (std::error_code ec; !module && !fs::is_regular_file(script, ec)) throw InputError("torchrun: no such script: " + script);
    // One node on this machine's loopback is a local run; other nodes must reach this one's ranks.
    std::string not_local;
    if (n_nodes > 1) not_local = "a multi-node run (--nnodes " + a->nnodes + "): its ranks reach the other nodes over the network";
    else if (!env::is_loopback(a->master_addr)) not_local = "--master-addr " + a->master_addr + " is not this machine's loopback";
    contain(a->no_contain, not_local);

    // The scenario a file with [workload] kind = "program" would give, expecting pass.
    scenario::Scenario s;
    // A module's name part is its last component ("train" of -m pkg.train).
    const std::string named = module ? script.substr(script.rfind('.') + 1) + ".py" : script;
    s.name = "torchrun." + name_part(named) + (n_nodes > 1 ? ".node" + std::to_string(a->node_rank) : "");
    s.file = script;
    s.description = "lockstep torchrun " + script;
    s.tags = {"torchrun"};
    s.world_size = a->nproc_per_node * n_nodes;
    s.requires_ranks = a->nproc_per_node;  // the ranks this machine starts
    s.ranks_per_node = a->nproc_per_node;
    s.timeout_s = a->timeout_s;
    s.deadline_s = 86400.0;  // a training run may take long; no progress for timeout_s still ends a hang
    s.workload = "program";
    scenario::ProgramSpec p;
    p.command = {launch::python_interpreter()};
    if (module) p.command.push_back("-m");
    p.command.insert(p.command.end(), rest.begin() + (module ? 1 : 0), rest.end());
    p.python_modules = {"torch"};
    p.where = "lockstep torchrun";
    s.program = std::move(p);
    if (!a->curve.empty()) {
      if (const std::string why = scenario::curve_problem(a->curve); !why.empty()) throw InputError("--curve: " + why);
      s.curve = a->curve;
      s.curve_name = "loss";
    }
    s.tolerances = a->tolerances;
    s.tolerances.declared = !a->curve.empty() || cmd->count("--param-rtol") || cmd->count("--param-atol") || cmd->count("--curve-rtol");
    check_python(a->python, {s});  // a misspelt --python or LOCKSTEP_PYTHON: exit 2, naming it

    launch::LaunchOptions opts;
    opts.binary = launch::self_executable();
    opts.max_ranks = kMaxWorldSize;
    opts.nodes.nnodes = n_nodes;
    opts.nodes.node_rank = a->node_rank;
    if (!a->standalone) opts.nodes.master_addr = a->master_addr;
    if (port->count() > 0 || n_nodes > 1) opts.nodes.master_port = a->master_port;
    if (a->report_dir.empty()) a->report_dir = a->log_dir;
    const bool fresh = a->report_dir.empty();
    opts.report_dir = fresh ? fresh_report_dir() : a->report_dir;
    prepare_report_dir(opts.report_dir, "--report-dir");
    launch::install_cancel_handlers();
    // The ranks' lines, live, as torchrun prints them; no progress line to redraw between them.
    opts.echo = a->redirects == "0";
    opts.echo_ranks = parse_ranks_filter(a->local_ranks_filter, s.world_size);
    opts.progress = !opts.echo && isatty(STDOUT_FILENO);

    const auto run = launch::run_suite({s}, opts, std::cout);
    if (fresh) link_latest(opts.report_dir);
    const auto& r = run.results.front();
    // A program that could not run checked nothing: never 0.
    const bool ran_clean = r.status == report::Status::kPass && !r.diagnosis;
    // Where the time went between ranks: who waited for whom, and where (waits.json has each call).
    if (!r.waits.empty()) std::cout << r.waits << '\n' << "straggler: " << (r.straggler.empty() ? "none" : r.straggler) << '\n';
    std::cout << "verdict: ";
    if (r.status == report::Status::kSkip) std::cout << "not run (" << r.reason << ")";
    else if (r.diagnosis) std::cout << to_string(r.diagnosis->kind) << (r.diagnosis->rank >= 0 ? " (rank " + std::to_string(r.diagnosis->rank) + ")" : "");
    else std::cout << (ran_clean ? "pass" : std::string(report::to_string(r.status)));
    std::cout << "; report: " << opts.report_dir << '\n';
    exit_code = exit_code_after(ran_clean ? 0 : 1);
  });
}

}  // namespace lockstep::cli
