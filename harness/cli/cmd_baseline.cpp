#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/baseline/store.h"
#include "harness/cli/commands.h"
#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::cli {

void add_baseline(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("baseline", "Maintain a baseline database: check, import, export");
  cmd->footer("Examples:\n"
              "  lockstep baseline check --baseline base.db\n"
              "  lockstep baseline export --baseline base.db --out base.json   # reviewable text\n"
              "  lockstep baseline SUBCOMMAND --help");
  cmd->require_subcommand(1);
  auto db = std::make_shared<std::string>();

  auto* check = cmd->add_subcommand("check", "Run PRAGMA integrity_check and foreign_key_check; exit 2 when damaged");
  check->add_option("--baseline", *db, "the SQLite baseline database")->required();
  check->callback([db, &exit_code] {
    baseline::Store store(*db, baseline::Access::kRead);
    const auto problems = store.integrity_problems();
    if (!problems.empty()) {
      std::string msg = *db + ": database is damaged:";
      for (const auto& p : problems) msg += "\n  " + p;
      throw InputError(msg);
    }
    int runs = static_cast<int>(store.runs().size());
    std::cout << *db << ": ok (schema version " << store.schema_version() << ", " << store.environments().size()
              << " environments, " << runs << " runs)\n";
    exit_code = 0;
  });

  auto import_files = std::make_shared<std::vector<std::string>>();
  auto* imp = cmd->add_subcommand(
      "import", "Merge text exports (JSON) into the database (created when missing); all files or nothing");
  imp->add_option("--baseline", *db, "the SQLite baseline database")->required();
  imp->add_option("files", *import_files, "exports written by `lockstep baseline export`")->required();
  imp->callback([db, import_files, &exit_code] {
    // Every file is read and parsed before the database is opened, and all are merged in one
    // transaction.
    std::vector<baseline::Export> exports;
    for (const auto& f : *import_files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) throw InputError(f + ": cannot read");
      std::ostringstream text;
      text << in.rdbuf();
      exports.push_back(baseline::parse_export(text.str(), f));
    }
    baseline::Store store(*db, baseline::Access::kCreate);
    const auto added = store.import_exports(exports);
    for (std::size_t i = 0; i < exports.size(); ++i) std::cout << exports[i].source << ": " << added[i] << " run(s) added\n";
    exit_code = 0;
  });

  auto out = std::make_shared<std::string>();
  auto env = std::make_shared<std::string>();
  auto* exp = cmd->add_subcommand("export", "Write the database (or one environment) as reviewable JSON text");
  exp->add_option("--baseline", *db, "the SQLite baseline database")->required();
  exp->add_option("--out", *out, "output file (default: standard output)");
  exp->add_option("--env", *env, "export only this environment's runs");
  exp->callback([db, out, env, &exit_code] {
    baseline::Store store(*db, baseline::Access::kRead);
    const std::string text = store.export_text(*env);
    if (out->empty()) std::cout << text;
    else write_file_atomically(*out, text);
    exit_code = 0;
  });
}

}  // namespace lockstep::cli
